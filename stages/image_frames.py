"""Every frame of an image, upright, one at a time: what OCR reads.

unstructured's image partitioner OCRs the first frame of a file as its pixels are
stored: page 2 of a multi-page fax TIFF was never read, and a photo taken sideways
(pixels stored rotated, an EXIF ``Orientation`` tag saying how to show them) was OCR'd
on its side, which gives tesseract nothing.  :func:`upright_frames` gives each frame
(TIFF pages, GIF/WebP/APNG frames, HEIF images) as a single-frame file turned as its
EXIF orientation says (``PIL.ImageOps.exif_transpose``), with its 1-based number,
which the caller OCRs as that page.

Each frame's size is checked against ``RAGSTREAM_MAX_IMAGE_PIXELS`` before it is
decoded, and a file with more than ``RAGSTREAM_MAX_IMAGE_FRAMES`` frames fails (both
``stages.limits``; :func:`stages.limits.check_image_header` checks all of them first,
before any OCR).  One frame is decoded at a time, and its file is deleted once the
caller has moved on, so memory and disk hold one frame.
"""
from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Iterator

from stages.limits import check_frame_count, check_pixels

#: PIL modes a PNG stores as they are; other frames are converted to RGB first
PNG_MODES = frozenset({"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"})
ORIENTATION = 0x0112  # EXIF tag


def upright_frames(path: Path, label: str, tmp: Path) -> Iterator[tuple[int, Path]]:
    """``(frame number from 1, image file of that frame alone, upright)`` for every
    frame of the image at ``path``, in order.

    The file is ``path`` itself when it has one frame and no EXIF rotation or mirror;
    otherwise a PNG in ``tmp`` (its DPI kept), deleted when the next frame is asked
    for or the generator closes.  ``label`` (e.g. ``"TIFF"``) names the file in errors.

    Raises:
        LimitExceeded: a frame over ``max_image_pixels`` (before decoding it), or more
            frames than ``max_image_frames``.
        OSError / PIL errors: an unreadable frame (the caller reports the parse failure).
    """
    from PIL import Image as PILImage

    bomb_limit, PILImage.MAX_IMAGE_PIXELS = PILImage.MAX_IMAGE_PIXELS, None  # checked here instead
    try:
        with PILImage.open(path) as image:
            single = not _seek(image, 1)
            _seek(image, 0)
            number = 1
            while True:
                check_frame_count(number, label)
                check_pixels(*image.size, what=f"{label} image" + (f" frame {number}" if number > 1 else ""))
                if single and image.getexif().get(ORIENTATION, 1) in (1, None):
                    yield number, path
                    return
                out = tmp / f"frame-{number}.png"
                _save_upright(image, out)
                try:
                    yield number, out
                finally:
                    with suppress(OSError):
                        out.unlink()
                number += 1
                if not _seek(image, number - 1):
                    return
    finally:
        PILImage.MAX_IMAGE_PIXELS = bomb_limit


def _seek(image, frame: int) -> bool:
    """Move ``image`` to ``frame`` (0-based); False when there is no such frame."""
    try:
        image.seek(frame)
    except EOFError:
        return False
    return True


def _save_upright(image, out: Path) -> None:
    """The current frame of ``image``, turned by its EXIF orientation, saved as a PNG."""
    from PIL import ImageOps

    frame = ImageOps.exif_transpose(image)  # decodes this frame only; a copy, upright
    if frame.mode not in PNG_MODES:
        frame = frame.convert("RGB")
    dpi = image.info.get("dpi")
    frame.save(out, format="PNG", **({"dpi": tuple(float(d) for d in dpi[:2])} if dpi else {}))
