"""Normalize stage: check a stored upload and make it partitionable.

``normalize_file`` detects the real type by content, rejects what cannot be
processed with a specific reason (zero bytes, over size, unsupported type, encrypted,
corrupt), converts Office files to PDF with LibreOffice when the profile asks (legacy
doc/ppt/xls/odt/rtf always), repairs PDFs with broken structure (qpdf via pikepdf) and
counts PDF pages so the caller can fan out page ranges to several partition workers
(and unit ranges of other long documents: ``stages.document_parts``).
Blocking; run it in a process pool.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from stages import document_parts
from stages.detect import MIME, OFFICE_TYPES, detect_type
from stages.errors import (CorruptDocument, DocumentError, EmptyDocument, EncryptedDocument,
                           PasswordProtected,
                           TooLarge, UnsupportedType)
from stages.office import convert_to_pdf
from stages.parser_options import check_zip_parts
from stages.profiles import CONVERT_ONLY_TYPES, Profile

log = logging.getLogger(__name__)


@dataclass
class NormalizedFile:
    """What partition needs to know about a normalized document.

    Attributes:
        path: the file to partition (``src`` itself, or a converted/repaired PDF in
            ``workdir``).
        filetype: detected (or converted-to) type, e.g. ``"pdf"``, ``"docx"``.
        mime: MIME type of ``filetype``.
        source_filetype: the detected type of the upload before conversion.
        page_count: number of pages for a PDF, else None.
        converted: True when ``path`` is a LibreOffice conversion.
        reason: what normalize did and noticed, human-readable (e.g.
            ``"DOCX converted to PDF"``, ``"content is PNG image but name says .pdf"``).
        page_ranges: suggested 1-based inclusive page ranges of at most
            ``profile.max_pages_per_task`` pages for a PDF; for the types of
            ``stages.document_parts.SPLIT_TYPES`` ranges of its units (blocks,
            slides, sheets, paragraphs) holding at most that many pages' worth of
            text (``document_parts.CHARS_PER_PAGE`` per page), ``[]`` when the
            document fits one part.
    """

    path: Path
    filetype: str
    mime: str
    source_filetype: str
    page_count: int | None = None
    converted: bool = False
    reason: str = ""
    page_ranges: list[tuple[int, int]] = field(default_factory=list)


def page_ranges(page_count: int, per_task: int) -> list[tuple[int, int]]:
    """Split ``1..page_count`` into inclusive ranges of at most ``per_task`` pages."""
    per_task = max(1, per_task)
    return [(s, min(s + per_task - 1, page_count)) for s in range(1, page_count + 1, per_task)]


def normalize_file(src: Path, workdir: Path, profile: Profile) -> NormalizedFile:
    """Validate, detect, convert and inspect one uploaded file.

    Args:
        src: the uploaded file on local disk.
        workdir: writable scratch directory for conversions/repairs (kept by the
            caller until partition is done).
        profile: the category's profile.
    Returns:
        NormalizedFile.
    Raises:
        EmptyDocument: zero-byte file or PDF without pages.
        TooLarge: over ``profile.max_size_bytes``.
        UnsupportedType: unknown/unaccepted content type.
        EncryptedDocument: password-protected PDF or Office file.
        CorruptDocument: unreadable PDF (both pypdf and qpdf fail).
        ConversionFailed / ConversionTimeout: LibreOffice problems.
    """
    src, workdir = Path(src), Path(workdir)
    size = src.stat().st_size
    if size == 0:
        raise EmptyDocument("zero-byte file")
    if size > profile.max_size_bytes:
        raise TooLarge(f"file is {size:,} bytes, over profile '{profile.name}' limit of "
                       f"{profile.max_size_bytes:,} bytes")
    det = detect_type(src)
    notes = []
    if det.name_mismatch:
        notes.append(f"content is {det.filetype.upper()} but name says .{src.suffix.lower().lstrip('.')}")
    if det.encrypted:
        raise PasswordProtected(f"encrypted {det.filetype.upper()} (password-protected Office document)")
    if det.filetype == "unknown":
        raise UnsupportedType(f"unrecognised binary content ({det.magic_mime or 'no MIME type'})")
    if det.filetype == "zip":
        raise UnsupportedType("ZIP archive that is not an Office/OpenDocument file")
    if det.filetype not in profile.filetypes:
        raise UnsupportedType(f"{det.filetype.upper()} files are not accepted by profile "
                              f"'{profile.name}'" + (f" ({notes[0]})" if notes else ""))
    if det.filetype in ("docx", "pptx", "xlsx", "odt", "ods", "odp"):
        _check_zip(src, det.filetype.upper())
    path, ftype, converted = src, det.filetype, False
    needs_pdf = det.filetype in CONVERT_ONLY_TYPES or (
        profile.convert_office_to_pdf and det.filetype in OFFICE_TYPES)
    if needs_pdf:
        workdir.mkdir(parents=True, exist_ok=True)
        path = convert_to_pdf(src, workdir, det.filetype, profile.timeout_s)
        ftype, converted = "pdf", True
        notes.append(f"{det.filetype.upper()} converted to PDF")
    result = NormalizedFile(path, ftype, MIME[ftype], det.filetype, converted=converted)
    if ftype == "pdf":
        result.path, result.page_count, note = inspect_pdf(path, workdir)
        if note:
            notes.append(note)
        result.page_ranges = page_ranges(result.page_count, profile.max_pages_per_task)
    elif ftype in document_parts.SPLIT_TYPES:
        if ftype in ("docx", "pptx", "xlsx"):
            check_zip_parts(path, ftype.upper())  # bounded before the count reads a part
        result.page_ranges = document_parts.part_ranges(
            path, ftype, profile.max_pages_per_task * document_parts.CHARS_PER_PAGE)
        if result.page_ranges:
            notes.append(f"split into {len(result.page_ranges)} parts of at most "
                         f"{profile.max_pages_per_task} pages' worth of text")
    result.reason = "; ".join(notes)
    return result


def inspect_pdf(path: Path, workdir: Path) -> tuple[Path, int, str]:
    """Open a PDF, reject it when encrypted or unreadable, repair it when possible.

    Returns:
        ``(path_to_use, page_count, note)``; ``path_to_use`` is a qpdf-repaired copy in
        ``workdir`` when pypdf could not read the original but qpdf could.
    Raises:
        EncryptedDocument, CorruptDocument, EmptyDocument (no pages).
    """
    import pypdf
    from pypdf.errors import PyPdfError

    note = ""
    try:
        reader = pypdf.PdfReader(path, strict=False)
        if reader.is_encrypted:
            if not reader.decrypt(""):
                raise EncryptedDocument("encrypted PDF (password required to open)")
            note = "PDF encrypted with an empty user password (copy-protected): opened"
        count = len(reader.pages)
    except DocumentError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            RecursionError, OSError, NotImplementedError) as exc:
        path, count = _repair_pdf(path, workdir, exc)
        note = "repaired broken PDF structure with qpdf"
    if count == 0:
        raise EmptyDocument("PDF has no pages")
    return path, count, note


def _repair_pdf(path: Path, workdir: Path, first_error: Exception) -> tuple[Path, int]:
    import pikepdf

    try:
        with pikepdf.open(path) as pdf:
            workdir.mkdir(parents=True, exist_ok=True)
            repaired = workdir / f"{path.stem}.repaired.pdf"
            pdf.save(repaired)
            count = len(pdf.pages)
    except pikepdf.PasswordError:
        raise EncryptedDocument("encrypted PDF (password required to open)") from None
    except Exception as exc:  # qpdf raises PdfError and friends for broken files
        raise CorruptDocument("truncated or corrupt PDF: neither pypdf nor qpdf could read it",
                              detail=f"{_msg(first_error)}; qpdf: {_msg(exc)}") from None
    log.info("repaired %s with qpdf after pypdf error: %s", path, first_error)
    return repaired, count


def _check_zip(path: Path, label: str) -> None:
    """Reject an OOXML/OpenDocument package whose ZIP structure is broken."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise CorruptDocument(f"truncated or corrupt {label}: not a readable ZIP package",
                              detail=_msg(exc)) from None
    except Exception as exc:  # zlib.error and friends from damaged members
        raise CorruptDocument(f"truncated or corrupt {label}: damaged ZIP member",
                              detail=_msg(exc)) from None
    if bad is not None:
        raise CorruptDocument(f"truncated or corrupt {label}: damaged ZIP member {bad!r}")


def _msg(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    return (text[:200] or type(exc).__name__)
