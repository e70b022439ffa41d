"""Image files: OCR of every frame, and ruled tables recovered from each.

Split from ``stages.partition`` (which calls :func:`partition_image_file` for PNG,
JPEG, TIFF, BMP, GIF, WebP and HEIC) as ``stages.partition_pdf`` is for PDFs.
"""
from __future__ import annotations

import logging
from pathlib import Path

from stages.errors import OCRUnavailable
from stages.limits import check_image_header
from stages.profiles import Profile
from stages.tesseract import tesseract_available

log = logging.getLogger(__name__)


def partition_image_file(path: Path, label: str, profile: Profile, filename: str, tmp: Path) -> list:
    """Elements of an image file: every frame OCR'd upright (``stages.image_frames``),
    frame n as page n (``metadata.filetype`` PIL's name of the file's format, e.g.
    ``"TIFF"``), ruled tables recovered per frame when the profile extracts tables.

    ``label`` names the type in errors; ``filename`` goes to ``metadata.filename``;
    ``tmp`` holds one frame's PNG at a time.  Raises OCRUnavailable (strategy ``fast``
    or no tesseract) and LimitExceeded (pixels of a frame, number of frames).
    """
    check_image_header(path, label)
    if profile.strategy == "fast":
        raise OCRUnavailable(f"{label} image needs OCR but profile '{profile.name}' uses strategy 'fast'")
    if not tesseract_available():
        raise OCRUnavailable(f"{label} image needs OCR and tesseract is not installed")
    from unstructured.partition.common.metadata import get_last_modified_date
    from unstructured.partition.image import partition_image

    from stages.image_frames import upright_frames

    languages = list(profile.ocr_languages)
    elements: list = []
    modified, image_format = get_last_modified_date(str(path)), _image_format(path)
    for number, frame in upright_frames(path, label, tmp):  # a frame's file may be a PNG copy
        found = partition_image(filename=str(frame), strategy="ocr_only", metadata_filename=filename,
                                languages=languages, starting_page_number=number,
                                metadata_last_modified=modified)
        if profile.extract_tables and found:
            found = _image_tables(frame, found, filename, languages)
        elements += found
    for el in elements:
        el.metadata.partition_strategy = "ocr_only"
        el.metadata.filetype = image_format or el.metadata.filetype
    return elements


def _image_format(path: Path) -> str | None:
    """PIL's name of the image file's format (``"TIFF"``), as unstructured records it."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(path) as image:
            return image.format
    except Exception:  # noqa: BLE001 - a name for metadata only
        return None


def _image_tables(path: Path, elements: list, filename: str, languages: list[str]) -> list:
    """Ruled tables recovered from a single-frame image file (one frame of
    ``stages.image_frames.upright_frames``; ``stages.table_ocr``) and
    horizontal-rules-only tables (``stages.rule_tables``) replace the OCR lines they
    cover; on any error the OCR elements are kept as they are."""
    from PIL import Image as PILImage

    from stages.pdf_extras import merge_page_items
    from stages.rule_tables import image_tables, keep_text_outside
    from stages.table_ocr import recover_tables, table_elements

    try:
        with PILImage.open(path) as image:
            dpi = float((image.info.get("dpi") or (0, 0))[0] or 0)
            dpi = dpi if 100 <= dpi <= 600 else 200.0  # unknown or screen resolution: assume a scan
            image.load()
            found = recover_tables(image, dpi, languages)
            size = image.size
            meta = dict(page_number=elements[0].metadata.page_number or 1, filename=filename,
                        filetype=elements[0].metadata.filetype)
            items = table_elements(found, size[0], size[1], languages=languages, **meta)
            try:
                items += image_tables(image, dpi, languages, existing=[t.box for t in found], **meta)
            except Exception as exc:  # noqa: BLE001 - rule-only tables are a bonus too
                log.warning("rule-table recovery failed on image %s: %s", filename, exc)
    except Exception as exc:  # noqa: BLE001 - tables are a bonus, the OCR text is not
        log.warning("table recovery failed on image %s: %s", filename, exc)
        return elements
    if not items:
        return elements
    try:
        elements = keep_text_outside(elements, items[len(found):], image, dpi, languages)
    except Exception as exc:  # noqa: BLE001
        log.warning("caption recovery failed on image %s: %s", filename, exc)
    return merge_page_items(elements, items)
