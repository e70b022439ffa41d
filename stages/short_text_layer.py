"""Pages whose text layer pdfminer reads only in part: take pdfium's text instead.

unstructured's ``fast`` strategy reads a PDF's text layer with pdfminer, which
decodes some fonts only in part: glyphs of CID TrueType fonts with a custom encoding
and no ToUnicode map it can use come out as nothing, while pdfium (Chrome's PDF
engine, via pypdfium2) maps them.  Measured 2026-12-06 on Amazon's 2022
sustainability report (82 pages, held-out dev set, bench/heldout): pdfminer gave
about 14 K characters for the whole document (page 16: 622), pdfium 43,271 words
(page 16: 911), pdftotext every line.  Every page "had text", so no page was OCR'd,
and the document COMPLETED with most of its text missing — nothing flagged it.

So, per page, the words pdfminer's elements hold are compared with the words pdfium
finds inside the page box (``get_text_bounded``: text drawn outside the page is not
on the page, as stages/offpage_text.py rules for pdfminer).  A page where pdfminer has
under :data:`SHORT_RATIO` of pdfium's words, and at least :data:`MIN_MISSING_WORDS`
fewer, keeps its pdfminer tables and images but its text elements are replaced by
pdfium's text as paragraphs (:func:`paragraphs`; NarrativeText,
``metadata.partition_strategy = "pdfium"``).  Costs one pdfium text pass over the
pages (0.3 s for those 82 pages).
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

SHORT_RATIO = 0.5       # pdfminer under half of pdfium's words: its text layer is partial
MIN_MISSING_WORDS = 50  # and at least this many words short (a caption's worth is noise)
_SENTENCE_END = re.compile(r"[.!?:;]['\")\]]?$")


def pdfium_page_texts(path: Path, first: int) -> dict[int, str]:
    """{page number: pdfium's text inside the page box} for every page of ``path``,
    numbered from ``first`` (``path`` may be a page range cut from a larger PDF)."""
    import pypdfium2

    out: dict[int, str] = {}
    pdf = pypdfium2.PdfDocument(str(path))
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            out[first + i] = textpage.get_text_bounded()
            textpage.close()
            page.close()
    finally:
        pdf.close()
    return out


def paragraphs(text: str) -> list[str]:
    """pdfium's page text (lines ending ``\\r\\n``) as paragraphs: lines joined with a
    space (a line ending in ``-`` joined without it), a paragraph ending at a blank
    line or after a line that ends a sentence (``. ! ? : ;``, optionally closed by a
    quote or bracket).  Empty paragraphs are dropped."""
    out: list[str] = []
    current = ""
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = " ".join(raw.split())
        if not line:
            if current:
                out.append(current)
            current = ""
            continue
        if current.endswith("-") and line[:1].islower():
            current = current[:-1] + line
        else:
            current = f"{current} {line}" if current else line
        if _SENTENCE_END.search(line):
            out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


_WORD = re.compile(r"\w+")


def _words(text: str) -> int:
    """Word count: runs of word characters (dot leaders and rules count nothing)."""
    return len(_WORD.findall(text))


def replace_short_pages(elements: list, path: Path, first: int, filename: str,
                        skip: set[int] = frozenset()) -> tuple[list, list[int]]:
    """``(elements, numbers of the pages whose text was replaced)``: on each page of
    ``path`` (numbered from ``first``; pages in ``skip`` untouched — e.g. those going to
    OCR) where the text of ``elements`` is short of pdfium's (module docstring), the
    page's text elements give way to pdfium's paragraphs; Table and Image elements
    stay.  Element order: pages in order, a replaced page's elements where its old
    ones were."""
    from unstructured.documents.elements import ElementMetadata, NarrativeText

    texts = pdfium_page_texts(path, first)
    found: dict[int, int] = {}
    for el in elements:
        n = el.metadata.page_number or first
        found[n] = found.get(n, 0) + _words(el.text or "")
    short = sorted(n for n, text in texts.items() if n not in skip
                   and _words(text) - found.get(n, 0) >= MIN_MISSING_WORDS
                   and found.get(n, 0) < SHORT_RATIO * _words(text))
    if not short:
        return elements, []
    log.warning("%s: pdfminer read under %.0f%% of the words pdfium reads on page(s) %s; "
                "taking pdfium's text there", filename, SHORT_RATIO * 100, ", ".join(map(str, short)))

    def replacement(n: int) -> list:
        out = []
        for para in paragraphs(texts[n]):
            el = NarrativeText(text=para, metadata=ElementMetadata(filename=filename, page_number=n))
            el.metadata.filetype = "application/pdf"
            el.metadata.partition_strategy = "pdfium"
            out.append(el)
        return out

    kept, placed = [], set()
    for el in elements:
        n = el.metadata.page_number or first
        if n not in short:
            kept.append(el)
            continue
        if n not in placed:
            kept += replacement(n)
            placed.add(n)
        if el.category in ("Table", "Image"):
            kept.append(el)
    for n in short:  # pages pdfminer gave no element at all
        if n not in placed:
            kept += replacement(n)
    kept.sort(key=lambda el: el.metadata.page_number or first)  # stable: order within a page kept
    return kept, short
