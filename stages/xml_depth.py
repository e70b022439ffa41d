"""Flatten XML nested deeper than lxml reads, so a valid deep file is text, not "corrupt".

unstructured's ``partition_xml`` reads with ``lxml.etree.iterparse``, whose libxml2
parser refuses documents deeper than 256 elements ("Excessive depth in document: 256,
use XML_PARSE_HUGE option") — a valid file then failed as "truncated or corrupt XML".
:func:`flatten` reads the file with the standard library's expat parser (streaming, no
depth limit, external entities never fetched, expat's own entity-expansion guard) and
re-emits it as a two-level document ``<document><text>…</text>…</document>`` holding
each element's own text in document order, which is what ``partition_xml`` extracts
from any document (the text of every element, leaves first).  Only documents over
:data:`MAX_DEPTH` are rewritten.
"""
from __future__ import annotations

from pathlib import Path
from xml.parsers import expat
from xml.sax.saxutils import escape

#: deeper than this is rewritten (libxml2 refuses more than 256 without XML_PARSE_HUGE)
MAX_DEPTH = 200


def depth_and_texts(path: Path) -> tuple[int, list[str]]:
    """The maximum element depth of the XML at ``path`` and each element's own text
    (stripped, empty ones left out) in the order the elements end.  Raises
    ``xml.parsers.expat.ExpatError`` for malformed XML."""
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[list[str]] = []
    texts: list[str] = []
    deepest = 0

    def start(name, attrs) -> None:  # noqa: ARG001 — attributes are not text
        nonlocal deepest
        stack.append([])
        deepest = max(deepest, len(stack))

    def end(name) -> None:  # noqa: ARG001
        text = "".join(stack.pop()).strip()
        if text:
            texts.append(text)

    def data(chunk: str) -> None:
        if stack:
            stack[-1].append(chunk)

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = data
    with open(path, "rb") as fh:
        parser.ParseFile(fh)
    return deepest, texts


def flatten(path: Path, tmp: Path) -> Path:
    """``path`` itself when its depth is at most :data:`MAX_DEPTH` (or expat cannot
    read it: the ordinary parser then gives the verdict), else a flat copy in ``tmp``
    (see the module docstring)."""
    try:
        deepest, texts = depth_and_texts(path)
    except expat.ExpatError:
        return path
    if deepest <= MAX_DEPTH:
        return path
    out = tmp / ("flat-" + path.name)
    out.write_text('<?xml version="1.0" encoding="utf-8"?>\n<document>\n'
                   + "".join(f"<text>{escape(t)}</text>\n" for t in texts) + "</document>\n",
                   encoding="utf-8")
    return out
