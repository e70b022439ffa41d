"""File names from the outside world: made safe once at the edge, shown safely everywhere.

:func:`safe_filename` turns any client-supplied name (an HTTP multipart part, a CLI
path) into one that is a single, valid path component on every file system we
write to: no ``/`` or ``\\``, not ``.``/``..``/empty, no C0/C1 control characters,
no bidirectional overrides or isolates (U+202A–U+202E, U+2066–U+2069, which make
``evil‮fdp.exe`` render as ``evilexe.pdf``), NFC-normalised, at most 255 bytes of
UTF-8 with the extension kept.  The caller keeps the original as metadata.

:func:`printable` escapes the same characters for terminals and log records
(``\\x1b``, ``\\u202e``) so a name can never move a cursor or reorder a line.
"""
from __future__ import annotations

import re
import unicodedata

MAX_NAME_BYTES = 255
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
#: C0 and C1 controls, DEL, bidi embeddings/overrides/isolates/marks, line and paragraph separators
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f" + _BIDI + "\u2028\u2029\ufeff]")
_EXT = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def printable(text: str) -> str:
    """``text`` with control, bidi and separator characters escaped as ``\\xNN`` /
    ``\\uNNNN`` (a backslash itself is left alone); for terminals and log records."""
    def esc(m: re.Match) -> str:
        c = ord(m.group(0))
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    return _UNSAFE.sub(esc, text)


def _truncate_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding is at most ``limit`` bytes."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore")


def safe_filename(name: str | None, *, default: str = "upload") -> str:
    """A safe single path component for the client-supplied ``name``.

    Takes the last component after any ``/`` or ``\\`` (a client path), drops
    control and bidi characters, NFC-normalises, strips surrounding spaces and dots
    on the left, and truncates to :data:`MAX_NAME_BYTES` bytes of UTF-8 keeping the
    extension (``.pdf``).  ``None``, empty, ``.``, ``..`` or nothing left → ``default``
    (with the extension, if one survives).  Never raises.
    """
    text = unicodedata.normalize("NFC", name or "")
    text = _UNSAFE.sub("", text)
    text = re.split(r"[/\\]", text)[-1].strip()
    ext_match = _EXT.search(text)
    ext = ext_match.group(0) if ext_match else ""
    stem = text[: len(text) - len(ext)] if ext else text
    stem = stem.lstrip(". ").rstrip(" ")
    if stem in ("", ".", ".."):
        stem = default
    stem = _truncate_utf8(stem, MAX_NAME_BYTES - len(ext.encode("utf-8"))).rstrip(" ")
    return (stem or default) + ext


def original_name_metadata(original: str | None) -> dict[str, str]:
    """S3 user metadata keeping a sanitised name's original: ``{"original-filename":
    percent-encoded UTF-8}`` (S3 metadata values must be ASCII), or ``{}`` when None."""
    from urllib.parse import quote

    return {"original-filename": quote(original, safe="")} if original is not None else {}


def _escaped(value):
    import os

    if isinstance(value, str):
        return printable(value)
    if isinstance(value, os.PathLike):
        return printable(os.fspath(value)) if isinstance(os.fspath(value), str) else value
    return value


def install_log_escaping() -> None:
    """Make every log record of this process escape control and bidi characters in its
    string (and path) arguments — file names, document titles — so a hostile name
    cannot forge log lines or reorder a terminal.  The format string itself is left
    alone.  Idempotent."""
    import logging

    old = logging.getLogRecordFactory()
    if getattr(old, "_ragstream_escaping", False):
        return

    def factory(*args, **kwargs):
        record = old(*args, **kwargs)
        if isinstance(record.args, tuple):
            record.args = tuple(_escaped(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _escaped(v) for k, v in record.args.items()}
        return record

    factory._ragstream_escaping = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
