"""Partition stage: a normalized file → unstructured element dicts.

``partition_file`` is blocking and Kafka-free; it runs in a spawn process pool and
prepares unstructured for offline use itself (``stages.offline_nlp``), so a fresh
worker needs no setup.  PDFs use the ``fast`` strategy on pages with a text layer,
pdfplumber for tables and images (``stages.pdf_extras``), and tesseract OCR for
pages without a text layer when tesseract is installed; otherwise such pages fail
the document with a specific reason.  Other types use unstructured's native
partitioners.  Every failure is a ``stages.errors.DocumentError`` with a specific
reason; zero elements from a non-empty file is always an error.
"""
from __future__ import annotations

import logging
import re
import tempfile
import zipfile
from pathlib import Path

from stages import offline_nlp  # noqa: F401  (sets DO_NOT_TRACK before unstructured loads)
from stages.deadline import DeadlineExceeded, deadline
from stages.errors import (DocumentError, EmptyDocument, LimitExceeded, TooLarge,
                           UnsupportedType)
from stages.limits import (check_count, check_image_header, check_pixels, limit,  # noqa: F401
                           out_of_memory)
from stages import charsets, document_parts, docx_rewrite, html_depth, nlp_limits, parser_options, text_hygiene, xml_depth
from stages.office_repair import without_dangling_relationships
from stages.parse_errors import as_document_error
from stages.sheet_size import check_xlsx
from stages.profiles import Profile
from stages.tesseract import tesseract_available  # noqa: F401  (also imported from here)

log = logging.getLogger(__name__)

IMAGE_TYPES = {"png", "jpeg", "tiff", "bmp", "gif", "webp", "heic"}
NATIVE = {  # filetype -> (module, function, extra kwargs)
    "docx": ("unstructured.partition.docx", "partition_docx", {"infer_table_structure": True}),
    "pptx": ("unstructured.partition.pptx", "partition_pptx", {"infer_table_structure": True}),
    "xlsx": ("unstructured.partition.xlsx", "partition_xlsx", {"infer_table_structure": True}),
    "html": ("unstructured.partition.html", "partition_html", {}),
    "xml": ("unstructured.partition.xml", "partition_xml", {}),
    "md": ("unstructured.partition.md", "partition_md", {}),
    "txt": ("unstructured.partition.text", "partition_text", {}),
    "csv": ("unstructured.partition.csv", "partition_csv", {"infer_table_structure": True}),
    "tsv": ("unstructured.partition.tsv", "partition_tsv", {}),
    "eml": ("unstructured.partition.email", "partition_email", {"process_attachments": False}),
}


def partition_file(path: Path, filetype: str, profile: Profile,
                   pages: tuple[int, int] | None = None, filename: str | None = None) -> list[dict]:
    """Partition one file into unstructured element dicts.

    Args:
        path: the normalized file (``NormalizedFile.path``).
        filetype: its detected type (``NormalizedFile.filetype``), e.g. ``"pdf"``.
        profile: the category profile (strategy, tables, images, OCR languages,
            ``timeout_s`` — enforced with SIGALRM when called on a main thread).
        pages: 1-based inclusive ``(first, last)`` range of a split document: PDF
            pages, or for ``stages.document_parts.SPLIT_TYPES`` its units (DOCX
            blocks, PPTX slides, XLSX sheets, HTML blocks, text paragraphs).  Page
            numbers in the result stay those of the whole document.  Ignored for
            other types.
        filename: name recorded in ``metadata.filename`` (and in the deterministic
            element ids); defaults to ``path.name``.
    Returns:
        ``element.to_dict()`` dicts: ``type``, ``element_id``, ``text``, ``metadata``
        (``page_number`` ≥ 1 for PDFs/images/PPTX — frame n of an image is page n —
        ``text_as_html`` on Tables, ``image_base64`` on PDF Images, ``speaker_notes``
        True on a PPTX slide's notes (``stages.slide_notes``), ``coordinates``,
        ``filename``, ...).  An e-mail's attachments and forwarded messages follow its
        body, partitioned as uploads (``stages.email_attachments``; ``filename`` theirs,
        ``attached_to_filename`` the message's); ``skipped_parts`` names the Office
        parts missing and the attachments that failed or lay too deep, with reasons.
    Raises:
        EmptyDocument: zero bytes, or no elements from a non-empty file.
        OCRUnavailable: scanned pages / images while tesseract is missing (or the
            strategy is ``fast``).
        EncryptedDocument, CorruptDocument, UnsupportedType, ConversionTimeout,
        ConversionFailed: see ``stages.errors``.
        LimitExceeded (a TooLarge): over a limit of ``stages.limits`` (image or rendered
            page pixels, sheet cells, Office part size, elements per document).
        OutOfMemory: the parse hit its process's memory cap.
        stages.partition_pdf.PageRangeError (a ValueError): ``pages`` outside the document.

    Every string in the result has been through ``stages.text_hygiene.clean_text``;
    element texts longer than ``RAGSTREAM_MAX_ELEMENT_CHARS`` are split into pieces.
    """
    path = Path(path)
    name = filename or path.name  # before ``path`` becomes a repaired or transcoded copy
    if path.stat().st_size == 0:
        raise EmptyDocument("zero-byte file")
    offline_nlp.ensure_offline_nlp()
    _prepare_libraries()
    label = filetype.upper()
    skipped: list[str] = []
    part = None  # a part of a split document (stages.document_parts.Part)
    whole_bytes = path.stat().st_size
    attached: list[dict] = []  # element dicts of an e-mail's attachments (stages.email_attachments)
    with deadline(profile.timeout_s, f"partitioning {label} timed out after {profile.timeout_s:g} s"), \
            tempfile.TemporaryDirectory(prefix="ragstream-parse-") as tmp:
        try:
            if pages and filetype in document_parts.SPLIT_TYPES:
                if filetype in ("docx", "pptx", "xlsx"):
                    parser_options.check_zip_parts(path, label)  # bounded before the cut reads a part
                part = document_parts.cut_part(path, filetype, *pages, Path(tmp) / "part")
                path = part.path
            if filetype in ("docx", "pptx", "xlsx"):
                path, skipped = _checked_office(path, filetype, label, Path(tmp))
            if filetype == "pdf":
                from stages.partition_pdf import partition_pdf_file
                path, skipped = _defused_pdf(path, pages, Path(tmp))
                elements = partition_pdf_file(path, profile, pages, name)
            elif filetype in IMAGE_TYPES:
                from stages.partition_image import partition_image_file
                elements = partition_image_file(path, label, profile, name, Path(tmp))
            elif filetype in NATIVE:
                if filetype in TEXT_TYPES:
                    path = utf8_copy(path, Path(tmp), filetype)
                if filetype in ("csv", "tsv"):
                    from stages.sheet_size import check_delimited
                    check_delimited(path, "\t" if filetype == "tsv" else ",")
                    _csv_field_limit()
                if filetype == "xml":
                    path = xml_depth.flatten(path, Path(tmp))
                elements = _partition_native(path, filetype, profile, name, whole_bytes,
                                             1 + part.page_offset if part and filetype == "docx" else 1)
                if not _has_content(elements) and filetype in ("docx", "pptx", "xlsx") and tesseract_available() \
                        and profile.strategy != "fast":
                    from stages.office_images import ocr_embedded_images
                    elements = ocr_embedded_images(path, filetype, name,
                                                   list(profile.ocr_languages))
                if filetype == "pptx":
                    from stages.slide_notes import with_speaker_notes
                    elements = with_speaker_notes(elements, path, name)
                if filetype == "eml":
                    from stages.email_attachments import attachment_elements
                    attached, skipped = attachment_elements(
                        path, name, Path(tmp), lambda p, t, n: _attachment(p, t, n, profile, Path(tmp)))
            else:
                raise UnsupportedType(f"no partitioner for {label} files")
        except DocumentError:
            raise
        except ValueError as exc:
            if type(exc).__name__ == "PageRangeError":
                raise
            raise as_document_error(exc, label) from exc
        except MemoryError as exc:
            raise out_of_memory(label) from exc
        except BaseException as exc:  # noqa: BLE001 - every parser failure gets a reason
            if isinstance(exc, (KeyboardInterrupt, SystemExit, DeadlineExceeded)):
                raise
            if type(exc).__name__ == "DecompressionBombError":  # PIL, on a decode we did not pre-check
                raise LimitExceeded(f"{label} holds an image over the pixel limit: {exc}") from exc
            raise as_document_error(exc, label) from exc
        if not _has_content(elements) and not attached:  # nothing, or only PageBreaks / empty text
            raise EmptyDocument(_empty_reason(path, filetype)
                                + (f"; attachments skipped: {'; '.join(skipped)}" if skipped else ""))
    check_count(len(elements) + len(attached), "max_elements", "elements")
    dicts = split_long_elements(text_hygiene.clean_elements([_plain(e.to_dict()) for e in elements]),
                                limit("max_element_chars")) + attached
    check_count(len(dicts), "max_elements", "elements")
    if part is not None:
        document_parts.renumber_part(dicts, filetype, pages[0], part)
    for d in dicts:
        if filename:
            d["metadata"].pop("file_directory", None)
        if skipped:
            d["metadata"]["skipped_parts"] = skipped
    return dicts


def _attachment(path: Path, filetype: str | None, name: str, profile: Profile, tmp: Path) -> list[dict]:
    """Element dicts of one e-mail attachment saved at ``path``: normalized first (type
    detected, Office converted, PDF repaired, profile's types and size enforced) unless
    its ``filetype`` is known (a forwarded message), then partitioned as ``name``."""
    if filetype is None:
        from stages.normalize import normalize_file

        norm = normalize_file(path, tmp / f"{path.name}.work", profile)
        path, filetype = norm.path, norm.filetype
    return partition_file(path, filetype, profile, filename=name)


def _prepare_libraries() -> None:
    """Per-process, idempotent settings of the parser libraries (see each module)."""
    from PIL import Image

    charsets.install()
    parser_options.install()
    text_hygiene.install()
    html_depth.install()
    nlp_limits.install()
    # a decode we did not check first (an image inside a document) fails as
    # DecompressionBombError at twice this; the checks below use the limit itself
    Image.MAX_IMAGE_PIXELS = limit("max_image_pixels") or None


def _csv_field_limit() -> None:
    """unstructured's CSV reader sets Python's csv field limit to its own constant before
    reading (sniffing, pandas' python engine): make that constant ours."""
    import sys

    import unstructured.partition.csv as unstructured_csv

    unstructured_csv.CSV_FIELD_LIMIT = limit("max_field_chars") or sys.maxsize


def _checked_office(path: Path, filetype: str, label: str, tmp: Path) -> tuple[Path, list[str]]:
    """Size checks of an Office package before parsing, then a copy without relationships
    to missing parts and, for DOCX, with revisions accepted, content controls unwrapped
    and spans clamped (``stages.docx_rewrite``): ``(package to parse, missing part names)``."""
    parser_options.check_zip_parts(path, label)
    if filetype == "xlsx":
        check_xlsx(path)
    path, missing = without_dangling_relationships(path, tmp)
    if filetype == "xlsx":
        from stages.xlsx_formulas import with_values
        path, note = with_values(path, tmp / "recalc")
        if note:
            log.info("%s", note)
    if filetype == "docx":
        path = docx_rewrite.rewritten(path, tmp)
    return path, missing


def _defused_pdf(path: Path, pages: tuple[int, int] | None, tmp: Path) -> tuple[Path, list[str]]:
    """The PDF with pages whose streams decode past ``max_stream_decoded_mb`` emptied,
    and one reason per such page (``stages.pdf_bombs``).  Raises LimitExceeded when
    every page of the range is such a page."""
    from stages.pdf_bombs import defuse

    first, last = pages or (1, 1 << 30)
    defused, reasons, bombed = defuse(path, first, last, tmp)
    if bombed:
        log.warning("%s: %s", path.name, "; ".join(reasons))
        if pages and len(bombed) == last - first + 1 or not pages and _pdf_pages(path) == len(bombed):
            raise LimitExceeded("PDF " + "; ".join(reasons))
    return defused, reasons


def _pdf_pages(path: Path) -> int:
    import pypdf

    return len(pypdf.PdfReader(path, strict=False).pages)


def split_long_elements(dicts: list[dict], max_chars: int) -> list[dict]:
    """Element dicts with every ``text`` longer than ``max_chars`` split into consecutive
    pieces of at most ``max_chars`` (at a whitespace when one lies in the second half
    of a piece); each piece keeps the metadata, its id is ``{element_id}-{n}``.
    A long Table is cut by ``stages.table_split.pack_table``: groups of rows under the
    first row, each piece with its own ``text_as_html`` (none for the plain-text
    pieces of a cell too long for one piece)."""
    from stages.table_split import pack_table

    if not max_chars:
        return dicts
    out: list[dict] = []
    for d in dicts:
        text = d.get("text") or ""
        if len(text) <= max_chars:
            out.append(d)
            continue
        if d.get("type") == "Table":
            pieces = pack_table((d.get("metadata") or {}).get("text_as_html"), text, max_chars)
            for n, p in enumerate(pieces):
                meta = {k: v for k, v in (d.get("metadata") or {}).items() if k != "text_as_html"}
                out.append({**d, "element_id": f"{d.get('element_id')}-{n}", "text": p.text,
                            "metadata": meta | ({"text_as_html": p.html} if p.html else {})})
            continue
        for n, piece in enumerate(_pieces(text, max_chars)):
            out.append({**d, "element_id": f"{d.get('element_id')}-{n}", "text": piece,
                        "metadata": dict(d.get("metadata") or {})})
    return out


def _pieces(text: str, size: int):
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            space = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
            if space > start + size // 2:
                end = space + 1
        yield text[start:end]
        start = end


def _has_content(elements: list) -> bool:
    """True when some element carries text or an image payload."""
    return any((el.text or "").strip() or getattr(el.metadata, "image_base64", None)
               for el in elements)


def _plain(value):
    """JSON-safe copy: numpy scalars/strings (OCR output) → built-ins; tuples kept."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if value is None or type(value) in (str, bool, int, float):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    if isinstance(value, (int, float)):
        return int(value) if isinstance(value, int) else float(value)
    return str(value)


#: types whose bytes are text a parser decodes itself: given to it as UTF-8
TEXT_TYPES = ("txt", "md", "csv", "tsv", "html", "xml")
_XML_ENCODING = re.compile(r"""^(\ufeff?\s*<\?xml[^>]*?\bencoding\s*=\s*)(["'])[^"']*\2""")


def utf8_copy(path: Path, tmp: Path, filetype: str = "csv") -> Path:
    """``path`` itself, or a UTF-8 copy in ``tmp`` when a parser would misread it.

    UTF-32 or UTF-16 text (with or without a byte-order mark,
    ``charsets.sniff_unicode``) of any of :data:`TEXT_TYPES` is transcoded (an XML
    declaration's ``encoding`` then says UTF-8; an HTML one is read as UTF-8 anyway,
    ``charsets.decode_html``).  A CSV/TSV that is not valid UTF-8 is decoded by
    ``charsets.decode_fallback`` (a guessed charset, else U+FFFD for bad bytes): a
    delimited file in a legacy charset or with stray bytes (e.g. an encoded lone
    surrogate) is text, not "corrupt".  Other types keep their own charset handling.
    """
    with open(path, "rb") as fh:
        unicode = charsets.sniff_unicode(fh.read(charsets.SNIFF_BYTES))
    out = tmp / ("utf8-" + path.name)
    if unicode not in (None, "utf-8-sig"):
        text = path.read_bytes().decode(unicode, errors="replace").lstrip("\ufeff")
        if filetype == "xml":
            text = _XML_ENCODING.sub(r"\1\2UTF-8\2", text, count=1)
        out.write_text(text, encoding="utf-8")
        return out
    if filetype not in ("csv", "tsv"):
        return path
    data = path.read_bytes()
    try:
        data.decode("utf-8")
        return path
    except UnicodeDecodeError:
        out.write_text(charsets.decode_fallback(data), encoding="utf-8")
        return out


def _partition_native(path: Path, filetype: str, profile: Profile, filename: str,
                      whole_bytes: int = 0, first_page: int = 1) -> list:
    """unstructured's partitioner of ``filetype`` on ``path``.  ``whole_bytes``: the
    size of the whole document when ``path`` is one part of it (plain text over
    ``plain_text_fast_bytes`` takes the linear-time rules in every part, as it would
    whole); ``first_page``: a DOCX part's first page number (unstructured counts
    rendered page breaks and odd/even section starts from it)."""
    import importlib

    module, func, extra = NATIVE[filetype]
    fn = getattr(importlib.import_module(module), func)
    if filetype == "docx" and first_page > 1:
        extra = {**extra, "starting_page_number": first_page}
    if filetype == "txt" and max(whole_bytes, path.stat().st_size) > limit("plain_text_fast_bytes"):
        from stages.plain_text import partition_plain_text

        log.info("%s: %d bytes of plain text, over RAGSTREAM_PLAIN_TEXT_FAST_BYTES: linear-time "
                 "paragraph rules instead of per-paragraph NLP", filename, path.stat().st_size)
        return partition_plain_text(path, filename, list(profile.ocr_languages))
    # HTML (files, e-mail bodies, Markdown) is decoded and flattened in stages.html_depth.install
    return fn(filename=str(path), metadata_filename=filename, languages=list(profile.ocr_languages), **extra)


def _empty_reason(path: Path, filetype: str) -> str:
    label = filetype.upper()
    if filetype in ("docx", "pptx", "xlsx"):
        try:
            with zipfile.ZipFile(path) as zf:
                media = [n for n in zf.namelist() if "/media/" in n]
        except zipfile.BadZipFile:
            media = []
        if media:
            why = ("tesseract not installed" if not tesseract_available()
                   else "OCR found no text in them")
            return f"{label} has no text, only {len(media)} embedded image(s) ({why})"
    what = {"xlsx": "no cell values", "csv": "no rows"}.get(filetype, "no text content")
    return f"{label} has {what} (0 elements from {path.stat().st_size:,} bytes)"

