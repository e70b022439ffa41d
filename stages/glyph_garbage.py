"""Text layers that are not text: glyph codes without a Unicode mapping.

A PDF font without a ``ToUnicode`` map and without an encoding pdfminer can resolve
gives runs of ``(cid:N)`` for every glyph; others give U+FFFD or private-use code
points.  Indexed as they are, such pages fill chunks with tokens no question can
match.  :func:`garbage_ratio` measures, per page, the share of a page's
non-space characters that are such codes; :data:`GARBAGE_RATIO` (0.3) and
:data:`MIN_CHARS` decide that the page's text layer is unreadable, and
:mod:`stages.partition_pdf` then drops that layer and OCRs the rendered page, or,
without OCR, reports the page as unreadable instead of indexing it.
"""
from __future__ import annotations

import re

GARBAGE_RATIO = 0.3  # a page of real text has almost none; a page without ToUnicode ~1.0
MIN_CHARS = 20       # fewer non-space characters: too little to judge
_CID = re.compile(r"\(cid:\d+\)")


def _bad_char(ch: str) -> bool:
    code = ord(ch)
    return (ch == "\ufffd" or 0xE000 <= code <= 0xF8FF or 0xF0000 <= code
            or (code < 32 and ch not in "\t\n\r\f"))


def garbage_ratio(text: str) -> float:
    """Share (0..1) of ``text``'s non-space characters that are unmapped glyphs:
    every character of a ``(cid:N)`` run, U+FFFD, private-use and control
    characters.  0.0 for text without non-space characters."""
    cid_chars = sum(len(m) for m in _CID.findall(text))
    rest = _CID.sub("", text)
    other = sum(1 for ch in rest if _bad_char(ch))
    total = cid_chars + sum(1 for ch in rest if not ch.isspace())
    return (cid_chars + other) / total if total else 0.0


def unreadable(text: str) -> bool:
    """True when ``text`` (one page's text layer) is mostly unmapped glyphs."""
    return len("".join(text.split())) >= MIN_CHARS and garbage_ratio(text) > GARBAGE_RATIO
