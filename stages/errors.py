"""Document-level errors raised by the blocking stage functions, and the reason taxonomy.

Every error carries a stable machine-readable ``code`` (a class attribute, one of
:data:`CODES`: what the FAILED status, the ``document_versions.error_code`` column,
the API, the dashboard and the callback carry), a human-readable ``reason`` (one
sentence for people — what goes into the FAILED status and the callback, never a bare
"failed" and never raw exception text), ``permanent`` (True when retrying the same
bytes with the same deployment cannot succeed, so the event goes straight to the
dead-letter topic instead of being retried) and ``detail`` (optional internal text —
a library's message, an exception type — for the logs and the dead letter only).

Errors are plain picklable exceptions (they cross the spawn process-pool boundary):
``reason``, ``permanent`` and ``detail`` are stored in ``args`` so ``pickle`` rebuilds
them.
"""
from __future__ import annotations

from typing import Optional

#: every failure code, with the sentence the README table gives for it
CODES: dict[str, str] = {
    "encrypted": "the file is encrypted (a PDF that needs a password to open)",
    "password_protected": "an Office document protected with a password",
    "corrupt": "truncated, malformed or otherwise unreadable bytes",
    "empty": "a zero-byte file, or a file with no extractable text",
    "unsupported_type": "a file type (by content) the profile or the parsers do not handle",
    "too_large": "the file is over the profile's size limit",
    "limit_exceeded": "a per-document limit (pixels, cells, elements, chunks) was hit; "
                      "the reason names the limit and its value",
    "ocr_unavailable": "the content needs OCR and the profile or the installation has none",
    "timeout": "parsing or converting ran past its time limit",
    "out_of_memory": "parsing ran out of memory (or past its memory cap)",
    "conversion_failed": "the converter (LibreOffice) or a parser failed on this file",
    "parser_crashed": "the parser process died on this file",
    "dependency_unavailable": "a service the pipeline needs (broker, S3, PostgreSQL, Milvus, "
                              "Triton) stayed unreachable past the document deadline",
    "internal": "an unexpected error inside ragstream (details in the worker log)",
}


class DocumentError(Exception):
    """Base class: a document that cannot be (fully) processed.

    Attributes:
        code: stable failure code (class attribute), one of :data:`CODES`.
        reason: specific, human-readable sentence, e.g. ``"encrypted PDF"``.
        permanent: True when a retry cannot help (bad bytes, unsupported type).
        detail: internal text for logs and dead letters (None when there is none).
    """

    code: str = "internal"
    default_permanent: bool = True

    def __init__(self, reason: str, permanent: bool | None = None,
                 detail: Optional[str] = None) -> None:
        if permanent is None:
            permanent = self.default_permanent
        super().__init__(reason, permanent, detail)
        self.reason = reason
        self.permanent = permanent
        self.detail = detail

    def __str__(self) -> str:
        return self.reason

    @property
    def kind(self) -> str:
        """Short machine-readable error class name, e.g. ``"EncryptedDocument"``."""
        return type(self).__name__

    def to_dict(self) -> dict:
        """``{"kind", "code", "reason", "permanent"}`` for status/dead-letter events."""
        return {"kind": self.kind, "code": self.code, "reason": self.reason,
                "permanent": self.permanent}


class EncryptedDocument(DocumentError):
    """Encrypted document that cannot be opened without the password (PDF)."""

    code = "encrypted"


class PasswordProtected(EncryptedDocument):
    """Office document protected with a password (an OLE ``EncryptedPackage``)."""

    code = "password_protected"


class CorruptDocument(DocumentError):
    """Truncated, malformed or otherwise unreadable bytes."""

    code = "corrupt"


class EmptyDocument(DocumentError):
    """Zero-byte file, or a non-empty document that yields no elements."""

    code = "empty"


class UnsupportedType(DocumentError):
    """A file type (by content) the profile or the parsers do not handle."""

    code = "unsupported_type"


class TooLarge(DocumentError):
    """A file over the profile's size limit."""

    code = "too_large"


class LimitExceeded(TooLarge):
    """A per-document resource limit was hit (pixels, sheet cells, Office part size,
    elements, chunks): a kind of :class:`TooLarge` with its own code.

    The reason names the limit and its value, e.g. ``"sheet has 17,179,869,184 cells,
    limit 5,000,000"``."""

    code = "limit_exceeded"


class OCRUnavailable(DocumentError):
    """Content that needs OCR (scans, images) while no OCR engine is installed."""

    code = "ocr_unavailable"


class ConversionTimeout(DocumentError):
    """A conversion or parse that ran past its time budget (may pass on a retry)."""

    code = "timeout"
    default_permanent = False


class OutOfMemory(DocumentError):
    """Parsing ran out of memory (MemoryError, or the task's memory cap)."""

    code = "out_of_memory"


class ConversionFailed(DocumentError):
    """An external converter (LibreOffice) or parser failed for another reason."""

    code = "conversion_failed"
    default_permanent = False


class ParserCrashed(DocumentError):
    """The process parsing the document died (a signal, an abort in C code)."""

    code = "parser_crashed"


class DependencyUnavailable(DocumentError):
    """A service stayed unreachable past the document deadline."""

    code = "dependency_unavailable"


class InternalError(DocumentError):
    """An unexpected error (a bug): the sentence says so, the detail goes to the log."""

    code = "internal"


def error_with_code(code: str, reason: str) -> DocumentError:
    """A permanent DocumentError of the class whose code is ``code`` (the first such
    class in definition order; InternalError for an unknown code) with ``reason``:
    a failure recorded as ``(code, reason)`` raised again (a split document whose
    every part failed, agents/chunk.py)."""
    classes, seen = [DocumentError], []
    while classes:
        cls = classes.pop(0)
        seen.append(cls)
        classes += cls.__subclasses__()
    cls = next((c for c in seen if c.code == code and c is not DocumentError), InternalError)
    return cls(reason, permanent=True)


def code_of(exc: BaseException) -> str:
    """The failure code of any exception: a DocumentError's own, else ``"internal"``."""
    return exc.code if isinstance(exc, DocumentError) else "internal"


def encode_reason(code: str, reason: str) -> str:
    """``"[code] reason"``: how a failure is stored in the ledger's one ``reason`` column."""
    return f"[{code}] {reason}"


def decode_reason(stored: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """``(code, reason)`` from :func:`encode_reason`'s text; a text without a known
    ``[code]`` prefix (written before the taxonomy) gives ``(None, text)``."""
    if stored and stored.startswith("["):
        head, sep, rest = stored[1:].partition("] ")
        if sep and head in CODES:
            return head, rest
    return None, stored
