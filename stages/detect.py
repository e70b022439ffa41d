"""Detect a document's real type from its bytes, not its name.

``detect_type(path)`` reads the file's head and decides by signature: PDF, images,
OOXML zips told apart by their part names (``word/``, ``ppt/``, ``xl/``), OpenDocument
by their ``mimetype`` entry, legacy OLE2 Office files by their stream names, and
text by heuristics (HTML / XML / Markdown / CSV / TSV / plain text).  libmagic
(python-magic) is consulted for the rest.  The file extension is only a tie-breaker
among text types (a ``.md`` file of plain prose is Markdown, a ``.txt`` with ``#``
headings stays text unless the Markdown signals are strong).
"""
from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import magic

from stages.charsets import sniff_unicode

HEAD_BYTES = 64 * 1024

MIME = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "doc": "application/msword",
    "ppt": "application/vnd.ms-powerpoint",
    "xls": "application/vnd.ms-excel",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "epub": "application/epub+zip",
    "rtf": "application/rtf",
    "html": "text/html",
    "xml": "application/xml",
    "md": "text/markdown",
    "txt": "text/plain",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "eml": "message/rfc822",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "tiff": "image/tiff",
    "gif": "image/gif",
    "bmp": "image/bmp",
    "webp": "image/webp",
    "heic": "image/heic",
    "zip": "application/zip",
    "empty": "application/x-empty",
    "unknown": "application/octet-stream",
}

IMAGE_TYPES = frozenset({"png", "jpeg", "tiff", "gif", "bmp", "webp", "heic"})
OFFICE_TYPES = frozenset({"docx", "pptx", "xlsx", "doc", "ppt", "xls", "odt", "ods", "odp", "rtf"})
TEXT_TYPES = frozenset({"html", "xml", "md", "txt", "csv", "tsv", "eml"})

_EXT_ALIASES = {"jpg": "jpeg", "jpe": "jpeg", "tif": "tiff", "htm": "html", "xhtml": "html",
                "markdown": "md", "text": "txt", "log": "txt"}


@dataclass(frozen=True)
class DetectedType:
    """Result of content-based detection.

    Attributes:
        filetype: short name (``"pdf"``, ``"docx"``, ``"png"``, ``"txt"``, ... or
            ``"empty"`` for zero bytes, ``"unknown"`` for unrecognised binary).
        mime: canonical MIME type of ``filetype``.
        extension: the lower-cased extension of the name (without dot, aliases
            resolved: ``jpg`` → ``jpeg``), ``""`` if none.
        encrypted: True for a password-protected OOXML package (OLE2 wrapper with
            an ``EncryptedPackage`` stream); PDFs are checked in normalize.
        magic_mime: what libmagic said, for diagnostics.
    """

    filetype: str
    mime: str
    extension: str = ""
    encrypted: bool = False
    magic_mime: str = ""

    @property
    def name_mismatch(self) -> bool:
        """True when the file's extension names a different known type."""
        return bool(self.extension) and self.extension in MIME and self.extension != self.filetype \
            and not (self.filetype == "txt" and self.extension in TEXT_TYPES)


def _ext(path: Path) -> str:
    ext = path.suffix.lower().lstrip(".")
    return _EXT_ALIASES.get(ext, ext)


def _binary_signature(head: bytes) -> str | None:
    if b"%PDF-" in head[:1024]:
        return "pdf"
    sigs = (
        (b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpeg"), (b"II*\x00", "tiff"),
        (b"MM\x00*", "tiff"), (b"GIF87a", "gif"), (b"GIF89a", "gif"), (b"BM", "bmp"),
        (b"{\\rtf", "rtf"),
    )
    for sig, name in sigs:
        if head.startswith(sig):
            if name == "bmp" and len(head) < 26:
                continue
            return name
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1", b"ftypheif"):
        return "heic"
    return None


def _zip_type(path: Path, head: bytes) -> str:
    """OOXML / OpenDocument / EPUB / plain zip, from the central directory or,
    for a truncated archive, from the local-header names in the first bytes."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            if "mimetype" in names:
                mt = zf.read("mimetype")[:100].decode("ascii", "replace").strip()
                for suffix, name in (("opendocument.text", "odt"), ("opendocument.spreadsheet", "ods"),
                                     ("opendocument.presentation", "odp"), ("epub+zip", "epub")):
                    if mt.endswith(suffix):
                        return name
    except (zipfile.BadZipFile, OSError, KeyError):
        names = [m.decode("latin-1") for m in re.findall(rb"PK\x03\x04.{26}([\x20-\x7e]{1,200})", head, re.S)]
        if not names:  # no intact local header names: fall back to raw substrings
            names = [n.decode() for n in (b"word/", b"ppt/", b"xl/") if n in head]
    for prefix, name in (("word/", "docx"), ("ppt/", "pptx"), ("xl/", "xlsx")):
        if any(n.startswith(prefix) for n in names):
            return name
    return "zip"


def _ole_type(head: bytes, ext: str) -> tuple[str, bool]:
    """Legacy Office (CFB/OLE2) by stream names (UTF-16LE in the directory)."""
    def has(name: str) -> bool:
        return name.encode("utf-16-le") in head
    if has("EncryptedPackage"):
        return (ext if ext in ("docx", "pptx", "xlsx") else "docx"), True
    if has("WordDocument"):
        return "doc", False
    if has("PowerPoint Document"):
        return "ppt", False
    if has("Workbook") or has("Book"):
        return "xls", False
    return (ext if ext in ("doc", "ppt", "xls") else "unknown"), False


_HTML_TAG = re.compile(rb"<(html|head|body|p|div|table|tr|td|th|h[1-6]|span|a|ul|ol|li|br|meta|title)\b", re.I)
_MD_STRONG = [re.compile(p, re.M) for p in (
    r"^#{1,6}\s+\S", r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", r"^```", r"^\s*[-*]\s+\[[ xX]\]\s",
)]
_MD_WEAK = [re.compile(p, re.M) for p in (
    r"\[[^\]\n]+\]\([^)\s]+\)", r"\*\*[^*\n]+\*\*", r"^\s*[-*+]\s+\S", r"^\s*\d+\.\s+\S", r"^>\s", r"`[^`\n]+`",
)]


def _decode(head: bytes) -> str | None:
    unicode = sniff_unicode(head)  # UTF-32/16 with or without a BOM (NUL bytes are theirs)
    if unicode:
        return head.decode(unicode, "replace")
    if b"\x00" in head:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 4:  # multi-byte char cut by the head boundary
            return head[: exc.start].decode("utf-8")
    text = head.decode("cp1252", "replace")
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\r\n\t\f")
    return None if controls > len(text) * 0.05 else text


def _delimited(text: str, ext: str, magic_mime: str) -> str | None:
    lines = [ln for ln in text.splitlines()[:50] if ln.strip()]
    if len(lines) < 2:
        return None
    for delim, name in (("\t", "tsv"), (",", "csv"), (";", "csv"), ("|", "csv")):
        if delim == "|" and ext != "csv":
            continue
        try:
            counts = [len(r) for r in csv.reader(io.StringIO("\n".join(lines)), delimiter=delim)]
        except csv.Error:
            continue
        if not counts or max(counts) < 2:
            continue
        mode = max(set(counts), key=counts.count)
        if mode < 2 or counts.count(mode) < 0.6 * len(counts):
            continue
        if ext in ("csv", "tsv") or "csv" in magic_mime or "tab-separated" in magic_mime:
            return name
        if len(counts) >= 3 and counts.count(mode) == len(counts) and delim in ",\t":
            return name
    return None


def _text_type(head: bytes, ext: str, magic_mime: str) -> str | None:
    text = _decode(head)
    if text is None:
        return None
    stripped = text.lstrip("\ufeff \r\n\t")
    low = stripped[:2048].lower()
    if low.startswith("<!doctype html") or "<html" in low[:2048] or ext == "html" and "<" in low:
        return "html"
    tags = len(_HTML_TAG.findall(head))
    if low.startswith("<?xml"):  # an XML prolog: HTML only when it says XHTML (<html> is above)
        return "html" if "xhtml" in low else "xml"
    if low.startswith("<"):
        return "html" if tags >= 3 or "xhtml" in low else "xml"
    if re.match(r"(?i)(received|return-path|from|message-id|mime-version|delivered-to):", stripped) \
            and "message/rfc822" in magic_mime:
        return "eml"
    if tags >= 5 and "<" in stripped[:200]:
        return "html"
    strong = sum(1 for p in _MD_STRONG if p.search(text))
    weak = sum(1 for p in _MD_WEAK if p.search(text))
    if ext == "md" or (ext not in ("txt", "csv", "tsv") and (strong >= 2 or (strong and weak >= 2))) \
            or (ext == "txt" and strong >= 2 and weak >= 2):
        return "md"
    delimited = _delimited(text, ext, magic_mime)
    if delimited:
        return delimited
    return "txt"


def detect_type(path: str | Path) -> DetectedType:
    """Detect the type of ``path`` by content.

    Args:
        path: a readable file.
    Returns:
        DetectedType; ``filetype`` is ``"empty"`` for a zero-byte file and
        ``"unknown"`` for binary content no rule recognises.
    Raises:
        OSError: if the file cannot be read.
    """
    path = Path(path)
    ext = _ext(path)
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    if not head:
        return DetectedType("empty", MIME["empty"], ext)
    try:
        magic_mime = magic.from_buffer(head, mime=True) or ""
    except magic.MagicException:  # pragma: no cover - libmagic database problems
        magic_mime = ""
    encrypted = False
    ftype = _binary_signature(head)
    if ftype is None and head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        ftype = _zip_type(path, head)
    if ftype is None and head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        ftype, encrypted = _ole_type(head, ext)
    if ftype is None:
        ftype = _text_type(head, ext, magic_mime)
    if ftype is None:
        ftype = _from_magic(magic_mime)
    return DetectedType(ftype, MIME.get(ftype, magic_mime or MIME["unknown"]), ext, encrypted, magic_mime)


def _from_magic(magic_mime: str) -> str:
    for name, mime in MIME.items():
        if mime == magic_mime and name not in ("empty", "unknown"):
            return name
    return "unknown"
