"""Turn a parser's exception into a DocumentError with a code and a human reason.

The library's own message (``KeyError: "There is no item named 'word/media/x.png'"``)
goes to the error's ``detail`` (logs, dead letters), never into its ``reason``.
"""
from __future__ import annotations

from stages.errors import (ConversionFailed, CorruptDocument, DocumentError, EncryptedDocument,
                           OutOfMemory)

#: exception class names that mean "the bytes are broken"
_CORRUPT_NAMES = {
    "BadZipFile", "BadZipfile", "XMLSyntaxError", "PSEOF", "PSSyntaxError", "PDFSyntaxError",
    "PDFNoValidXRef", "PDFNoValidXRefWarning", "PdfReadError", "PdfStreamError", "PdfError",
    "PackageNotFoundError", "InvalidFileException", "EOFError", "error", "UnicodeDecodeError",
    "ParseError", "PDFTypeError", "PDFValueError", "PDFNotImplementedError", "LargeZipFile",
    "UnidentifiedImageError", "DecompressionBombError", "zlib.error",
}
_CORRUPT_WORDS = ("truncated", "corrupt", "eof", "xref", "there is no item named", "not a zip",
                  "unexpected end", "invalid", "damaged", "malformed", "bad magic")


def as_document_error(exc: BaseException, label: str) -> DocumentError:
    """Classify ``exc`` raised while parsing a ``label`` (e.g. ``"PDF"``) file.

    Returns EncryptedDocument, OutOfMemory (transient), CorruptDocument (permanent),
    or ConversionFailed (permanent for parser bugs on these bytes, transient for OS
    errors); ``detail`` holds ``"Type: message"`` of ``exc``.
    """
    if isinstance(exc, DocumentError):
        return exc
    name = type(exc).__name__
    msg = " ".join(str(exc).split())[:300] or name
    detail = f"{name}: {msg}"
    low = f"{name} {msg}".lower()
    if "password" in low or "encrypt" in low or "decrypt" in low:
        return EncryptedDocument(f"encrypted {label} (password required to open)", detail=detail)
    if isinstance(exc, MemoryError):
        return OutOfMemory(f"out of memory while parsing the {label}", permanent=False, detail=detail)
    if isinstance(exc, OSError) and not isinstance(exc, (EOFError,)) and name not in _CORRUPT_NAMES:
        return ConversionFailed(f"I/O error while parsing the {label}", permanent=False, detail=detail)
    if name in _CORRUPT_NAMES or any(w in low for w in _CORRUPT_WORDS):
        return CorruptDocument(f"truncated or corrupt {label}: the parser could not read it",
                               detail=detail)
    return ConversionFailed(f"the {label} parser failed on this file", permanent=True, detail=detail)
