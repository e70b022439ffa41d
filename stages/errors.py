"""Document-level errors raised by the blocking stage functions.

Every error carries a human-readable ``reason`` (what goes into the FAILED status and
the dead-letter record, never a bare "failed") and ``permanent`` (True when retrying
the same bytes with the same deployment cannot succeed, so the event goes straight
to the dead-letter topic instead of being retried).

Errors are plain picklable exceptions (they cross the spawn process-pool boundary):
``reason`` and ``permanent`` are stored in ``args`` so ``pickle`` rebuilds them.
"""
from __future__ import annotations


class DocumentError(Exception):
    """Base class: a document that cannot be (fully) processed.

    Attributes:
        reason: specific, human-readable cause, e.g. ``"encrypted PDF"``.
        permanent: True when a retry cannot help (bad bytes, unsupported type).
    """

    default_permanent: bool = True

    def __init__(self, reason: str, permanent: bool | None = None) -> None:
        if permanent is None:
            permanent = self.default_permanent
        super().__init__(reason, permanent)
        self.reason = reason
        self.permanent = permanent

    def __str__(self) -> str:
        return self.reason

    @property
    def kind(self) -> str:
        """Short machine-readable error class name, e.g. ``"EncryptedDocument"``."""
        return type(self).__name__

    def to_dict(self) -> dict:
        """``{"kind", "reason", "permanent"}`` for status/dead-letter events."""
        return {"kind": self.kind, "reason": self.reason, "permanent": self.permanent}


class EncryptedDocument(DocumentError):
    """Password-protected document that cannot be opened without the password."""


class CorruptDocument(DocumentError):
    """Truncated, malformed or otherwise unreadable bytes."""


class EmptyDocument(DocumentError):
    """Zero-byte file, or a non-empty document that yields no elements."""


class UnsupportedType(DocumentError):
    """A file type (by content) the profile or the parsers do not handle."""


class TooLarge(DocumentError):
    """A file over the profile's size limit."""


class OCRUnavailable(DocumentError):
    """Content that needs OCR (scans, images) while no OCR engine is installed."""


class ConversionTimeout(DocumentError):
    """A conversion or parse that ran past its time budget (may pass on a retry)."""

    default_permanent = False


class ConversionFailed(DocumentError):
    """An external converter (LibreOffice) or parser failed for another reason."""

    default_permanent = False
