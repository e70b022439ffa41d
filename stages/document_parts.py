"""Long documents of every format split into parts, like a long PDF into page ranges.

Only PDFs used to be split (``stages.normalize.page_ranges``): an 872-page DOCX was one
partition task and failed "partitioning DOCX timed out after 600 s" on a busy machine
(issue 24, kind 6).  Here the other formats get the same treatment.  A document is a
sequence of *units* in reading order, each weighed in characters of text:

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
  from its XML: 8 bytes of sheet XML per character (``vodafone.xlsx`` and
  ``stanley-cups.xlsx`` of the corpus hold 6-11).
* MD: reference-style link definitions (``[1]: http://...``) apply only within their
  part, so a link used in an earlier part keeps its text but loses its URL.
* Anything that does not read as its type (a broken package) is not split: the one
  task then fails or passes on its own, with the parser's reason.

The budget is ``profile.max_pages_per_task`` × :data:`CHARS_PER_PAGE`, so a part
holds about as much text as a PDF page range.
"""
from __future__ import annotations

import copy
import logging
import re
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

#: characters of text on a typical full page (about 500 words of 6 characters with
#: the space); a part's budget is profile.max_pages_per_task pages of this
CHARS_PER_PAGE = 3000
#: bytes of worksheet XML per character of cell text (corpus XLSX files: 6-11)
XLSX_BYTES_PER_CHAR = 8

SPLIT_TYPES = frozenset({"docx", "pptx", "xlsx", "html", "txt", "md"})

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_R = "http://schemas.openxmlformats.org/package/2006/relationships"


def _parser():
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


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


def cut_part(path: Path, filetype: str, first: int, last: int, out_dir: Path) -> tuple[Path, int]:
    """``(file, page_offset)``: a file of ``filetype`` in ``out_dir`` holding units
    ``first``..``last`` (1-based, inclusive) of ``path``, and the number to add to the
    ``page_number`` of every element parsed from it.  Raises ``ValueError`` when the
    range is outside the document (its unit count has changed since normalize)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"part-{first}-{last}.{filetype}"
    offset = _CUTS[filetype](Path(path), first, last, out)
    return out, offset


# ------------------------------------------------------------------ DOCX
def _docx_body(zf: zipfile.ZipFile):
    from lxml import etree

    name = _main_part(zf, "officeDocument", "word/document.xml")
    root = etree.fromstring(zf.read(name), _parser())
    body = root.find(f"{{{_W}}}body")
    if body is None:
        raise KeyError("document has no w:body")
    return name, root, body


def _docx_blocks(body) -> list:
    return [el for el in body if isinstance(el.tag, str) and el.tag != f"{{{_W}}}sectPr"]


def _text_chars(el, tag: str) -> int:
    return sum(len(t.text or "") for t in el.iter(tag))


def _docx_weights(path: Path) -> list[int]:
    with zipfile.ZipFile(path) as zf:
        _, _, body = _docx_body(zf)
    return [_text_chars(b, f"{{{_W}}}t") for b in _docx_blocks(body)]


def _docx_pages_before(blocks: list) -> int:
    """Rendered page breaks (``w:lastRenderedPageBreak``) in ``blocks``: the pages
    before them as unstructured counts (partition passes ``1 +`` this as its
    ``starting_page_number``, and unstructured adds the extra page of an odd/even
    section start itself, by the parity of that number)."""
    return sum(1 for b in blocks for _ in b.iter(f"{{{_W}}}lastRenderedPageBreak"))


def _block_sectpr(block):
    ppr = block.find(f"{{{_W}}}pPr")
    return None if ppr is None else ppr.find(f"{{{_W}}}sectPr")


def _drop_refs(sect, kinds: tuple[str, ...]) -> None:
    for kind in kinds:
        for ref in sect.findall(f"{{{_W}}}{kind}Reference"):
            sect.remove(ref)


def _part_sections(body, blocks: list, first: int, last: int) -> None:
    """Section properties of the part ``first..last`` set so that unstructured emits
    each section's headers once, in the part where the section starts, and its
    footers once, where it ends (it emits headers at a section's start and footers at
    its end): a section that started in an earlier part loses its header references
    here; the part's trailing blocks get the ``w:sectPr`` of the section they belong
    to (the next section break, or the document's), with footers only when that
    section ends in this part."""
    from lxml import etree

    started_here = first == 1 or _block_sectpr(blocks[first - 2]) is not None
    for n in range(first, last + 1):
        sect = _block_sectpr(blocks[n - 1])
        if sect is not None:
            if not started_here:
                _drop_refs(sect, ("header",))
            started_here = True  # the next section starts after this block
    final = body.find(f"{{{_W}}}sectPr")
    if last == len(blocks):
        if final is not None and not started_here:
            _drop_refs(final, ("header",))
        return
    owner = next((s for s in (_block_sectpr(b) for b in blocks[last:]) if s is not None), final)
    trailing = copy.deepcopy(owner) if owner is not None else etree.SubElement(body, f"{{{_W}}}sectPr")
    if _block_sectpr(blocks[last - 1]) is not None:
        _drop_refs(trailing, ("header", "footer"))  # no block of that section is in this part
    else:
        _drop_refs(trailing, ("footer",) if started_here else ("header", "footer"))
    if final is not None:
        body.replace(final, trailing)
    elif trailing.getparent() is None:
        body.append(trailing)


def _cut_docx(path: Path, first: int, last: int, out: Path) -> int:
    from lxml import etree

    with zipfile.ZipFile(path) as zf:
        name, root, body = _docx_body(zf)
        blocks = _docx_blocks(body)
        _check_range(first, last, len(blocks), "blocks")
        offset = _docx_pages_before(blocks[:first - 1])
        _part_sections(body, blocks, first, last)
        for b in blocks[:first - 1] + blocks[last:]:
            body.remove(b)
        data = etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)
        _rewrite_zip(zf, out, {name: data})
    return offset


# ------------------------------------------------------------------ PPTX
def _main_part(zf: zipfile.ZipFile, kind: str, default: str) -> str:
    """The package's main part (the ``officeDocument`` relationship of ``_rels/.rels``)."""
    from lxml import etree

    try:
        rels = etree.fromstring(zf.read("_rels/.rels"), _parser())
    except KeyError:
        return default
    for rel in rels.iter(f"{{{_PKG_R}}}Relationship"):
        if rel.get("Type", "").endswith("/" + kind) and rel.get("TargetMode") != "External":
            return rel.get("Target", default).lstrip("/")
    return default


def _rels_targets(zf: zipfile.ZipFile, part: str) -> dict[str, str]:
    """rId -> package part name, from ``part``'s relationships."""
    from lxml import etree
    import posixpath

    folder, base = posixpath.split(part)
    try:
        rels = etree.fromstring(zf.read(posixpath.join(folder, "_rels", base + ".rels")), _parser())
    except KeyError:
        return {}
    def resolve(target: str) -> str:  # a target is package-absolute ("/xl/...") or relative
        return posixpath.normpath(target.lstrip("/") if target.startswith("/")
                                  else posixpath.join(folder, target))
    return {rel.get("Id"): resolve(rel.get("Target", ""))
            for rel in rels.iter(f"{{{_PKG_R}}}Relationship") if rel.get("TargetMode") != "External"}


def _listed_parts(zf: zipfile.ZipFile, default: str, ns: str, list_tag: str, item_tag: str):
    """``(main part name, its root, the list element, its items)`` of a package whose
    main part lists its units (a presentation's slides, a workbook's sheets)."""
    from lxml import etree

    name = _main_part(zf, "officeDocument", default)
    root = etree.fromstring(zf.read(name), _parser())
    lst = root.find(f"{{{ns}}}{list_tag}")
    items = [] if lst is None else [el for el in lst if el.tag == f"{{{ns}}}{item_tag}"]
    return name, root, lst, items


def _pptx_slides(zf: zipfile.ZipFile):
    return _listed_parts(zf, "ppt/presentation.xml", _P, "sldIdLst", "sldId")


def _cut_listed(path: Path, first: int, last: int, out: Path, listed, what: str, tidy=None) -> int:
    """Copy of the package with only items ``first..last`` of its list (``listed``:
    :func:`_pptx_slides` or :func:`_xlsx_sheets`), ``tidy(root)`` applied to the main
    part; returns the items before the range (the page offset)."""
    from lxml import etree

    with zipfile.ZipFile(path) as zf:
        name, root, lst, items = listed(zf)
        _check_range(first, last, len(items), what)
        for item in items[:first - 1] + items[last:]:
            lst.remove(item)
        if tidy is not None:
            tidy(root)
        data = etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)
        _rewrite_zip(zf, out, {name: data})
    return first - 1


def _pptx_weights(path: Path) -> list[int]:
    from lxml import etree

    with zipfile.ZipFile(path) as zf:
        name, _, _, ids = _pptx_slides(zf)
        targets = _rels_targets(zf, name)
        weights = []
        for sld in ids:
            part = targets.get(sld.get(f"{{{_R}}}id"))
            try:
                slide = etree.fromstring(zf.read(part), _parser()) if part else None
            except KeyError:
                slide = None
            weights.append(0 if slide is None else _text_chars(slide, f"{{{_A}}}t"))
    return weights


def _cut_pptx(path: Path, first: int, last: int, out: Path) -> int:
    return _cut_listed(path, first, last, out, _pptx_slides, "slides")


# ------------------------------------------------------------------ XLSX
def _xlsx_sheets(zf: zipfile.ZipFile):
    return _listed_parts(zf, "xl/workbook.xml", _S, "sheets", "sheet")


def _xlsx_weights(path: Path) -> list[int]:
    with zipfile.ZipFile(path) as zf:
        name, _, _, sheets = _xlsx_sheets(zf)
        targets = _rels_targets(zf, name)
        sizes = {i.filename: i.file_size for i in zf.infolist()}
    return [sizes.get(targets.get(s.get(f"{{{_R}}}id"), ""), 0) // XLSX_BYTES_PER_CHAR for s in sheets]


def _tidy_workbook(root) -> None:
    """Sheet indexes changed: sheet-scoped defined names (print areas, filters) go,
    the active and first tab become the first sheet of the part."""
    names = root.find(f"{{{_S}}}definedNames")
    if names is not None:
        for dn in [d for d in names if isinstance(d.tag, str) and d.get("localSheetId") is not None]:
            names.remove(dn)
    for view in root.iter(f"{{{_S}}}workbookView"):
        for attr in ("activeTab", "firstSheet"):
            if attr in view.attrib:
                view.set(attr, "0")


def _cut_xlsx(path: Path, first: int, last: int, out: Path) -> int:
    return _cut_listed(path, first, last, out, _xlsx_sheets, "sheets", _tidy_workbook)


# ------------------------------------------------------------------ HTML
_XML_DECLARATION = re.compile(r"^\ufeff?\s*<\?xml[^>]*>")


def _html_tree(path: Path):
    import lxml.html

    from stages.charsets import decode_html

    text = _XML_DECLARATION.sub("", decode_html(path.read_bytes()), count=1)  # lxml refuses one in a str
    root = lxml.html.document_fromstring(text) if text.strip() else None
    if root is None:
        raise ValueError("empty HTML")
    return root


def _html_spine(root):
    """The element whose children are the units: body, or the first descendant with
    more than one element child (a page wrapped in one or more single divs)."""
    node = root.find("body")
    if node is None:
        node = root
    while True:
        children = [c for c in node if isinstance(c.tag, str)]
        if len(children) != 1:
            return node, children
        node = children[0]


def _html_weights(path: Path) -> list[int]:
    _, children = _html_spine(_html_tree(path))
    return [len(c.text_content()) + len(c.tail or "") for c in children]


def _cut_html(path: Path, first: int, last: int, out: Path) -> int:
    import lxml.html

    root = _html_tree(path)
    spine, children = _html_spine(root)
    _check_range(first, last, len(children), "HTML blocks")
    if first > 1:
        spine.text = None  # text before the first unit belongs to the first part
    for c in children[:first - 1] + children[last:]:
        spine.remove(c)  # with its tail text (lxml keeps a tail on its element)
    head = root.find("head")
    if head is None:
        head = lxml.html.Element("head")
        root.insert(0, head)
    for meta in [m for m in head.iter("meta") if m.get("charset") is not None
                 or (m.get("http-equiv") or "").lower() == "content-type"]:
        meta.getparent().remove(meta)
    charset = lxml.html.Element("meta")
    charset.set("charset", "utf-8")
    head.insert(0, charset)
    out.write_bytes(lxml.html.tostring(root, encoding="utf-8", doctype="<!DOCTYPE html>"))
    return 0


# ------------------------------------------------------------------ TXT / MD
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _paragraphs(path: Path, filetype: str) -> list[str]:
    """Runs of lines, each ending with the blank lines after it; a blank line inside
    a Markdown fenced code block does not end one.  Joined, they give the text."""
    from stages.charsets import SNIFF_BYTES, decode_fallback, sniff_unicode

    data = path.read_bytes()
    unicode = sniff_unicode(data[:SNIFF_BYTES])
    if unicode:
        text = data.decode(unicode, errors="replace").lstrip("\ufeff")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = decode_fallback(data)
    paragraphs: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines(keepends=True):
        if filetype == "md" and _FENCE.match(line):
            fenced = not fenced
        blank = not line.strip()
        if not blank and current and not current[-1].strip() and not fenced:
            paragraphs.append("".join(current))
            current = []
        current.append(line)
    if current:
        paragraphs.append("".join(current))
    return paragraphs


def _text_weights_of(filetype: str):
    return lambda path: [len(p) for p in _paragraphs(path, filetype)]


def _cut_text_of(filetype: str):
    def cut(path: Path, first: int, last: int, out: Path) -> int:
        paragraphs = _paragraphs(path, filetype)
        _check_range(first, last, len(paragraphs), "paragraphs")
        out.write_text("".join(paragraphs[first - 1:last]), encoding="utf-8")
        return 0
    return cut


# ------------------------------------------------------------------ shared
def _check_range(first: int, last: int, count: int, what: str) -> None:
    if not 1 <= first <= last <= count:
        raise ValueError(f"part {first}-{last} is outside the document's {count} {what}")


def _rewrite_zip(zf: zipfile.ZipFile, out: Path, replaced: dict[str, bytes]) -> None:
    """Copy ``zf`` to ``out`` with the members in ``replaced`` given new bytes."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in zf.infolist():
            data = replaced.get(info.filename)
            if data is None:
                data = zf.read(info)
            dst.writestr(copy.copy(info), data, compress_type=zipfile.ZIP_DEFLATED)


_WEIGHTS = {"docx": _docx_weights, "pptx": _pptx_weights, "xlsx": _xlsx_weights,
            "html": _html_weights, "txt": _text_weights_of("txt"), "md": _text_weights_of("md")}
_CUTS = {"docx": _cut_docx, "pptx": _cut_pptx, "xlsx": _cut_xlsx,
         "html": _cut_html, "txt": _cut_text_of("txt"), "md": _cut_text_of("md")}
