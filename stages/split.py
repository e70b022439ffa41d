"""Splitting a text into pieces that each pass a size check (token limit, length).

:func:`split_text` cuts at the coarsest boundary that works: sentences (after
``. ! ? 。 ！ ？`` followed by white space, and at line breaks), then words (white
space), and only a single "word" that is still too big (a URL, a base64 blob, a run
of Hangul without spaces) is cut by characters.  Neighbouring pieces are packed
together greedily while the check still passes, so pieces are as large as allowed.
No character other than white space at a cut is lost or duplicated.
"""
from __future__ import annotations

import re
from typing import Callable

Fits = Callable[[str], bool]

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])(?=\s)|(?<=\n)")
_WORD = re.compile(r"\s*\S+")


def _sentences(text: str) -> list[str]:
    return [p for p in _SENTENCE_END.split(text) if p]


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


_LEVELS: tuple[Callable[[str], list[str]], ...] = (_sentences, _words)


def split_text(text: str, fits: Fits) -> list[str]:
    """Pieces of ``text`` (stripped, non-empty, in order) each with ``fits(piece)``.

    ``fits`` must be monotone (a piece that fits stays fitting when shortened) and
    accept any single character.  Joining the pieces' non-space characters gives the
    non-space characters of ``text``.  ``text`` that fits is returned whole; blank
    text gives ``[]``.  Raises ``ValueError`` when not even one character fits.
    """
    text = text.strip()
    if not text:
        return []
    return _split(text, 0, fits)


def _split(text: str, level: int, fits: Fits) -> list[str]:
    if fits(text):
        return [text]
    if level == len(_LEVELS):
        return _split_chars(text, fits)
    parts = _LEVELS[level](text)
    if len(parts) <= 1:
        return _split(text, level + 1, fits)
    pieces: list[str] = []
    current = ""
    for part in parts:
        if current and fits((current + part).strip()):
            current += part
            continue
        if current.strip():
            pieces.append(current.strip())
        if fits(part.strip()):
            current = part
        else:
            pieces += _split(part.strip(), level + 1, fits)
            current = ""
    if current.strip():
        pieces.append(current.strip())
    return pieces


def _split_chars(text: str, fits: Fits) -> list[str]:
    """Longest fitting prefixes, found by bisection (O(log n) checks per piece)."""
    pieces = []
    while text:
        lo, hi = 0, len(text)  # fits(text[:lo]) holds (or lo == 0), text[:hi + 1] unknown
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(text[:mid]):
                lo = mid
            else:
                hi = mid - 1
        if lo == 0:
            raise ValueError(f"not even one character fits: {text[:1]!r}")
        pieces.append(text[:lo].strip())
        text = text[lo:].strip()
    return [p for p in pieces if p]
