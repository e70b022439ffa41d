"""OCR fallback for Office files whose only content is pictures.

A PPTX of scanned slides or a DOCX holding a photographed page partitions natively
to zero elements (../shared/DESIGN.md: a peer pipeline produced zero chunks for an image-only
PPTX).  When tesseract is installed, ``ocr_embedded_images`` OCRs each embedded
picture (PPTX: per slide, with the slide number as page number; DOCX/XLSX: every
image under ``*/media/``) with unstructured's ``ocr_only`` image partitioner, every
frame of it and turned upright by its EXIF orientation (``stages.image_frames``).  Each
picture's size is read from its header first: one over ``RAGSTREAM_MAX_IMAGE_PIXELS``
fails the document (LimitExceeded) before anything decodes it.
"""
from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

OCR_EXTENSIONS = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif"}


def _pptx_pictures(path: Path) -> list[tuple[int, str, bytes]]:
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    out = []
    for number, slide in enumerate(Presentation(str(path)).slides, start=1):
        stack = list(slide.shapes)
        while stack:
            shape = stack.pop(0)
            if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
                stack[:0] = list(shape.shapes)
            elif shape.shape_type == MSO_SHAPE_TYPE.PICTURE:
                out.append((number, "." + shape.image.ext, shape.image.blob))
    return out


def _media(path: Path) -> list[tuple[int | None, str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        return [(None, Path(n).suffix.lower(), zf.read(n)) for n in sorted(zf.namelist())
                if "/media/" in n]


def ocr_embedded_images(path: Path, filetype: str, filename: str, languages: list[str]) -> list:
    """OCR the pictures embedded in a DOCX/PPTX/XLSX; returns unstructured Elements.

    Pictures in formats tesseract cannot read (EMF/WMF/SVG) are skipped.  Raises
    LimitExceeded for a picture over the pixel limit (checked from its header).
    """
    from unstructured.partition.image import partition_image

    from PIL import Image as PILImage

    # python-pptx opens each picture with PIL (header only, for its format): no bomb
    # check there, so the header check below names the size and the limit
    bomb_limit, PILImage.MAX_IMAGE_PIXELS = PILImage.MAX_IMAGE_PIXELS, None
    try:
        pictures = _pptx_pictures(path) if filetype == "pptx" else _media(path)
    finally:
        PILImage.MAX_IMAGE_PIXELS = bomb_limit
    from stages.image_frames import upright_frames
    from stages.limits import check_image_header

    elements = []
    with tempfile.TemporaryDirectory(prefix="ragstream-media-") as tmp:
        for i, (page, ext, blob) in enumerate(pictures):
            if ext not in OCR_EXTENSIONS:
                continue
            image = Path(tmp) / f"image-{i}{ext}"
            image.write_bytes(blob)
            label = f"{filetype.upper()} embedded {ext[1:].upper()}"
            check_image_header(image, label)
            frames = Path(tmp) / f"frames-{i}"
            frames.mkdir()
            for _, frame in upright_frames(image, label, frames):  # every frame, upright
                els = partition_image(filename=str(frame), strategy="ocr_only", metadata_filename=filename,
                                      languages=languages, starting_page_number=page or 1)
                for el in els:
                    if page is None:
                        el.metadata.page_number = None
                elements += els
            image.unlink()
    return elements
