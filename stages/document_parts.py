"""Long documents of every format split into parts, like a long PDF into page ranges.

Only PDFs used to be split (``stages.normalize.page_ranges``): an 872-page DOCX was one
partition task and failed "partitioning DOCX timed out after 600 s" on a busy machine
(issue 24, kind 6).  Here the other formats get the same treatment.  A document is a
sequence of *units* in reading order, each weighed in characters of text (the units of
each format are read and cut in ``stages.ooxml_parts`` and ``stages.markup_parts``):

============  ==========================================  ==========================
type          unit                                        weight
============  ==========================================  ==========================
DOCX          a top-level block of ``w:body`` (paragraph,  characters of its ``w:t``
              table, block-level content control, ...)
PPTX          a slide (``p:sldIdLst`` order)               characters of its ``a:t``
XLSX          a worksheet (``workbook.xml`` order)         its XML bytes / 8 (below)
HTML          a child element of the *spine*: ``body``,    its text characters
              or the first descendant with more than one
              element child (a page wrapped in one div)
TXT, MD       a paragraph: lines up to a blank line (never  its characters
              inside a fenced code block)
============  ==========================================  ==========================

:func:`part_ranges` packs consecutive units greedily into parts of at most
``budget_chars`` characters (a unit heavier than that is a part of its own; units are
never cut) and returns 1-based inclusive unit ranges, or ``[]`` when the document fits
in one part.  normalize sends one ``PartitionTask`` per range (``page_start`` /
``page_end`` hold unit numbers for these types); :func:`cut_part` makes, from the
stored file, a file of the same type holding just that range, which partition parses
like any upload; the chunk stage joins the parts in order like page ranges.

Page numbers stay those of the whole document: :func:`cut_part` returns the pages
before the range (slides and sheets before it; for DOCX the ``w:lastRenderedPageBreak``
marks before it, which is how unstructured counts DOCX pages: partition starts the
part's count there).

Decisions and what a split changes:

* DOCX: every part keeps the whole package (styles, numbering, media, headers); its
  body holds the range's blocks and a final ``w:sectPr``.  Headers and footers of the
  last section are kept only in the last part (the section ends there), so a header is
  not repeated once per part; sections that end inside a range keep theirs.  A
  paragraph whose mark is a tracked deletion is joined to the next paragraph by
  ``stages.docx_rewrite`` only within a part (at a part boundary both stay, as two
  elements: no text is lost either way).
* PPTX / XLSX: slides / sheets outside the range are dropped from the presentation's
  or workbook's list (their parts stay in the package, unreferenced); an XLSX part
  loses the workbook's sheet-scoped defined names (print areas, filters: not text).
  One huge sheet is one part: cells are not split.
* XLSX weight: shared strings live outside the sheets, so a sheet's text is estimated
  from its XML: 8 bytes of sheet XML per character (``ooxml_parts.XLSX_BYTES_PER_CHAR``;
  ``vodafone.xlsx`` and ``stanley-cups.xlsx`` of the corpus hold 6-11).
* MD: reference-style link definitions (``[1]: http://...``) apply only within their
  part, so a link used in an earlier part keeps its text but loses its URL.
* Anything that does not read as its type (a broken package) is not split: the one
  task then fails or passes on its own, with the parser's reason.

The budget is ``profile.max_pages_per_task`` × :data:`CHARS_PER_PAGE`, so a part
holds about as much text as a PDF page range.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import NamedTuple, Optional

from stages import markup_parts, ooxml_parts

log = logging.getLogger(__name__)

#: characters of text on a typical full page (about 500 words of 6 characters with
#: the space); a part's budget is profile.max_pages_per_task pages of this
CHARS_PER_PAGE = 3000

SPLIT_TYPES = frozenset({"docx", "pptx", "xlsx", "html", "txt", "md"})

_WEIGHTS = {"docx": ooxml_parts.docx_weights, "pptx": ooxml_parts.pptx_weights,
            "xlsx": ooxml_parts.xlsx_weights, "html": markup_parts.html_weights,
            "txt": markup_parts.text_weights_of("txt"), "md": markup_parts.text_weights_of("md")}
_CUTS = {"docx": ooxml_parts.cut_docx, "pptx": ooxml_parts.cut_pptx, "xlsx": ooxml_parts.cut_xlsx,
         "html": markup_parts.cut_html, "txt": markup_parts.cut_text_of("txt"),
         "md": markup_parts.cut_text_of("md")}
_UNIT_NAMES = {"docx": "blocks", "pptx": "slides", "xlsx": "sheets", "html": "HTML blocks",
               "txt": "paragraphs", "md": "paragraphs"}


# ------------------------------------------------------------------ public
def part_ranges(path: Path, filetype: str, budget_chars: int) -> list[tuple[int, int]]:
    """1-based inclusive unit ranges of at most ``budget_chars`` characters each (a
    heavier unit alone), in order, covering every unit of ``path``; ``[]`` when the
    whole document fits one part, when ``filetype`` is not in :data:`SPLIT_TYPES`, or
    when the file does not read as its type (logged; the parser gives the reason).
    Never raises for a document's content."""
    if filetype not in SPLIT_TYPES:
        return []
    try:
        weights = unit_weights(Path(path), filetype)
    except Exception as exc:  # noqa: BLE001 - a file that does not read is parsed whole
        log.info("%s not split into parts: %s: %s", filetype.upper(), type(exc).__name__, exc)
        return []
    ranges = pack(weights, budget_chars)
    return ranges if len(ranges) > 1 else []


def pack(weights: list[int], budget: int) -> list[tuple[int, int]]:
    """Greedy 1-based inclusive ranges over ``weights`` (characters per unit), each
    summing to at most ``budget`` unless one unit alone is heavier."""
    ranges: list[tuple[int, int]] = []
    start, total = 1, 0
    for n, weight in enumerate(weights, 1):
        if n > start and weight and total + weight > budget:  # weightless units join
            ranges.append((start, n - 1))
            start, total = n, 0
        total += weight
    if weights:
        ranges.append((start, len(weights)))
    return ranges


def unit_weights(path: Path, filetype: str) -> list[int]:
    """Characters of text per unit of ``path`` (see the module table).  Raises what
    reading the file raises (zipfile.BadZipFile, KeyError, lxml errors, OSError)."""
    return _WEIGHTS[filetype](path)


class Part(NamedTuple):
    """A cut part: ``path`` (a file of the document's type), ``page_offset`` (pages
    before the part, to add to every ``page_number`` parsed from it, DOCX excepted:
    partition passes it as unstructured's ``starting_page_number``) and
    ``unnumbered_page`` (the page of elements parsed without a page number: a DOCX
    part with no rendered page break of its own in a document that has some lies
    wholly on the page after the breaks before it; None elsewhere)."""

    path: Path
    page_offset: int
    unnumbered_page: Optional[int]


def cut_part(path: Path, filetype: str, first: int, last: int, out_dir: Path) -> Part:
    """The :class:`Part` holding units ``first``..``last`` (1-based, inclusive) of
    ``path``, written in ``out_dir``.  Raises ``ValueError`` when the range is outside
    the document (its unit count has changed since normalize)."""
    count = len(unit_weights(Path(path), filetype))  # parsed again: cheap beside the part's parse
    if not 1 <= first <= last <= count:
        raise ValueError(f"part {first}-{last} is outside the document's {count} {_UNIT_NAMES[filetype]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"part-{first}-{last}.{filetype}"
    return Part(out, *_CUTS[filetype](Path(path), first, last, out))


#: element types unstructured gives no page number in a DOCX with page breaks either
_NEVER_NUMBERED = frozenset({"Header", "Footer", "PageBreak"})


def renumber_part(dicts: list[dict], filetype: str, first_unit: int, part: Part) -> None:
    """Give the element dicts parsed from ``part`` (whose first unit is ``first_unit``)
    the whole document's page numbers (``part.page_offset`` added, except for DOCX,
    whose parse started at it; ``part.unnumbered_page`` for elements without one) and
    ids that no other part repeats (unstructured hashes text, page and position on the
    page, which restart in every part).  Changes ``dicts`` in place."""
    offset = 0 if filetype == "docx" else part.page_offset
    for d in dicts:
        meta = d.setdefault("metadata", {})
        if offset and isinstance(meta.get("page_number"), int):
            meta["page_number"] += offset
        elif part.unnumbered_page and meta.get("page_number") is None \
                and d.get("type") not in _NEVER_NUMBERED:
            meta["page_number"] = part.unnumbered_page
        d["element_id"] = hashlib.sha256(f"part {first_unit}\0{d.get('element_id')}".encode()).hexdigest()[:32]
