"""Per-document resource limits of the parse and chunk stages, in one place.

Each limit is read from the environment at call time (``RAGSTREAM_<NAME>``, the same
names as the fields of ``streams.settings.Settings``, which documents them; ``stages``
imports nothing of ours, so it reads the variables itself).  Hitting a limit fails
that document only, with :class:`stages.errors.LimitExceeded` (or :class:`OutOfMemory`)
whose reason names the limit and its value, e.g.
``"image is 20,000×20,000 = 400,000,000 pixels, limit 89,478,485"``.

=============================  =============  ==============================================
variable                       default        what
=============================  =============  ==============================================
RAGSTREAM_MAX_IMAGE_PIXELS     89,478,485     pixels of one image or rendered page, checked
                                              from the header before any decode or render
RAGSTREAM_MAX_SHEET_CELLS      5,000,000      rows × columns a spreadsheet sheet spans
                                              (what a dense load allocates)
RAGSTREAM_MAX_ELEMENTS         200,000        elements per document (after splitting)
RAGSTREAM_MAX_CHUNKS           20,000         chunks per document
RAGSTREAM_MAX_ELEMENT_CHARS    20,000         longer element texts are split into pieces
RAGSTREAM_MAX_PART_MB          512            uncompressed size of one part of an Office
                                              (zip) file
RAGSTREAM_PARSE_MEMORY_MB      6144           address-space cap (RLIMIT_AS) of each parse
                                              process; 0 = none
RAGSTREAM_PLAIN_TEXT_FAST_BYTES 1,000,000    a TXT file over this is partitioned by
                                              linear-time rules (stages/plain_text.py)
RAGSTREAM_MAX_STREAM_DECODED_MB 512          what one PDF stream may decode to (measured
                                              before any parser decodes it; a page with a
                                              stream over it is emptied and reported:
                                              stages/pdf_bombs.py)
RAGSTREAM_MAX_FIELD_CHARS      10,485,760     characters of one CSV/TSV field (Python's csv
                                              module stops at 131,072 by default;
                                              unstructured's own CSV reader allows 10 MiB)
RAGSTREAM_MAX_IMAGE_FRAMES     1,000          frames (pages) of one image file, each OCR'd
                                              as a page; counted before any decode
RAGSTREAM_MAX_EMAIL_DEPTH      3              levels of attachments opened inside an e-mail
                                              (a forwarded message's attachments are level 2);
                                              deeper ones are skipped and named, not failed
=============================  =============  ==============================================
"""
from __future__ import annotations

import os

from pathlib import Path

from stages.errors import DocumentError, LimitExceeded, OutOfMemory, TooLarge

DEFAULTS: dict[str, int] = {
    "max_image_pixels": 89_478_485,  # PIL's own DecompressionBomb threshold
    "max_sheet_cells": 5_000_000,
    "max_elements": 200_000,
    "max_chunks": 20_000,
    "max_element_chars": 20_000,
    "max_part_mb": 512,
    "parse_memory_mb": 6144,
    "plain_text_fast_bytes": 1_000_000,
    "max_stream_decoded_mb": 512,  # = max_part_mb; a 89 M-pixel CMYK image decodes to ~341 MiB
    "max_field_chars": 10 * 1_048_576,  # = unstructured.partition.csv.CSV_FIELD_LIMIT
    "max_image_frames": 1_000,
    "max_email_depth": 3,
}


def limit(name: str) -> int:
    """The current value of limit ``name`` (a key of :data:`DEFAULTS`).

    Raises KeyError for an unknown name, ValueError for a variable that is not an integer.
    """
    default = DEFAULTS[name]
    raw = os.environ.get(f"RAGSTREAM_{name.upper()}", "").strip().replace("_", "")
    return int(raw) if raw else default


def check_pixels(width: int, height: int, what: str = "image") -> None:
    """Raise LimitExceeded when a ``width``×``height`` ``what`` is over ``max_image_pixels``."""
    cap = limit("max_image_pixels")
    pixels = int(width) * int(height)
    if cap and pixels > cap:
        raise LimitExceeded(f"{what} is {int(width):,}×{int(height):,} = {pixels:,} pixels, "
                       f"limit {cap:,} (RAGSTREAM_MAX_IMAGE_PIXELS)")


def check_count(count: int, name: str, what: str) -> None:
    """Raise LimitExceeded when ``count`` ``what`` (e.g. ``"elements"``) is over limit ``name``."""
    cap = limit(name)
    if cap and count > cap:
        raise LimitExceeded(f"document has {count:,} {what}, limit {cap:,} (RAGSTREAM_{name.upper()})")


def out_of_memory(label: str) -> OutOfMemory:
    """The error for a ``label`` (e.g. ``"PDF"``) parse that hit the memory cap."""
    cap = limit("parse_memory_mb")
    where = f"the {cap:,} MiB cap (RAGSTREAM_PARSE_MEMORY_MB)" if cap else "the memory available"
    return OutOfMemory(f"out of memory: {label} parse exceeded {where}")  # permanent: the same bytes hit the same cap


def check_frame_count(frames: int, label: str) -> None:
    """Raise LimitExceeded when an image file has ``frames`` frames (pages), more than
    ``max_image_frames``; ``label`` names the file (e.g. ``"TIFF"``)."""
    cap = limit("max_image_frames")
    if cap and frames > cap:
        raise LimitExceeded(f"{label} image has more than {cap:,} frames, limit {cap:,} "
                            "(RAGSTREAM_MAX_IMAGE_FRAMES)")


def check_image_header(path: Path, label: str) -> None:
    """Raise TooLarge when an image file's header says it is over the pixel limit, or
    it has more frames than ``max_image_frames`` (read without decoding pixels; every
    frame is checked, counted by seeking, which stops at the limit)."""
    from PIL import Image as PILImage

    bomb_limit, PILImage.MAX_IMAGE_PIXELS = PILImage.MAX_IMAGE_PIXELS, None  # header only: no decode
    try:
        with PILImage.open(path) as image:
            frame = 0
            while True:
                check_frame_count(frame + 1, label)
                check_pixels(*image.size, what=f"{label} image" + (f" frame {frame + 1}" if frame else ""))
                frame += 1
                try:
                    image.seek(frame)
                except EOFError:
                    break
    except (TooLarge, DocumentError):
        raise
    except Exception:  # noqa: BLE001 - unreadable headers are reported by the parser
        return
    finally:
        PILImage.MAX_IMAGE_PIXELS = bomb_limit
