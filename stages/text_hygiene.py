"""Text hygiene: the one place where extracted text is made safe to store and send.

Every string an extractor produces (element text, every string in element metadata)
goes through :func:`clean_text` before it leaves the parse stage
(``stages.partition.partition_file`` calls :func:`clean_elements`).  After it, a
string encodes as strict UTF-8 (orjson, Kafka, PostgreSQL ``text`` and Milvus
``VARCHAR`` all refuse lone surrogates and PostgreSQL refuses NUL), so a hostile
extractor output can empty neither a page nor a write.

What :func:`clean_text` does, in this order:

1. UTF-16 surrogates: a high surrogate followed by a low one (what pdfminer yields
   for a CID font whose ``/ToUnicode`` is ``/Identity-H``: one code unit per glyph)
   is joined into the one code point they encode; any other (lone) surrogate is
   dropped.
2. C0 control characters other than TAB and LF are dropped (NUL included); CR is
   turned into LF (``\\r\\n`` → ``\\n``); DEL is dropped.
3. Unicode NFC normalisation.

:func:`install` applies the same function where unstructured builds its elements
(``Text.__init__``): unstructured hashes element text with strict UTF-8 and, on a
lone surrogate, silently drops a PDF's whole text layer (observed: "PDF text layer on
pages 1 yielded no elements").
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("([\ud800-\udbff])([\udc00-\udfff])")
# C0 controls except \t (09) and \n (0a); \r (0d) handled first; DEL (7f)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_installed = False


def _join_pair(match: re.Match) -> str:
    high, low = ord(match.group(1)), ord(match.group(2))
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def clean_text(text: str) -> str:
    """Return ``text`` with surrogate pairs joined, lone surrogates, NUL, C0 controls
    (except TAB/LF) and DEL removed, CR/CRLF turned into LF, in NFC.

    Idempotent: ``clean_text(clean_text(s)) == clean_text(s)``.  The result always
    encodes as strict UTF-8 and holds no ``\\x00``.
    """
    if not text:
        return text
    if _SURROGATE.search(text):
        text = _SURROGATE.sub("", _PAIR.sub(_join_pair, text))
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text


def clean_value(value: Any) -> Any:
    """:func:`clean_text` applied to every string inside ``value`` (dicts — keys too —,
    lists, tuples); other values returned unchanged."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(clean_value(v) for v in value)
    return value


def clean_elements(elements: list[dict]) -> list[dict]:
    """Element dicts (``element.to_dict()``) with every string cleaned: ``text``,
    ``type``, ``element_id`` and all of ``metadata`` (nested)."""
    return [clean_value(el) for el in elements]


def install() -> None:
    """Clean element text where unstructured creates it (idempotent; call in the parse
    process before partitioning).  Keeps unstructured's own strict-UTF-8 hashing from
    dropping text that holds surrogates."""
    global _installed
    if _installed:
        return
    from unstructured.documents.elements import Text

    original = Text.__init__

    def __init__(self, text: str, *args, **kwargs):  # noqa: N807 - the patched method
        if isinstance(text, str):
            text = clean_text(text)
        original(self, text, *args, **kwargs)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    Text.__init__ = __init__
    _installed = True
