"""Units of Office Open XML packages for ``stages.document_parts``: a DOCX body's
top-level blocks, a PPTX's slides, an XLSX's sheets; their weights (characters of text)
and a copy of the package holding a range of them.

Every ``*_weights(path)`` returns one int per unit, in reading order, and raises what
reading the package raises (zipfile.BadZipFile, KeyError for a missing part, lxml
errors, OSError).  Every ``cut_*(path, first, last, out)`` writes to ``out`` a package
of the same type holding units ``first..last`` (1-based, inclusive; the caller checks
the range) and returns ``(pages before them, the page of elements parsed without a
page number, or None)``: see ``stages.document_parts.Part``.  The decisions (what a part
keeps of headers, sections, defined names) are listed in ``stages.document_parts``.
"""
from __future__ import annotations

import copy
import zipfile
from pathlib import Path
from typing import Optional

#: bytes of worksheet XML per character of cell text (corpus XLSX files: 6-11)
XLSX_BYTES_PER_CHAR = 8

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_R = "http://schemas.openxmlformats.org/package/2006/relationships"


def _parser():
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


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


def docx_weights(path: Path) -> list[int]:
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


def cut_docx(path: Path, first: int, last: int, out: Path) -> tuple[int, Optional[int]]:
    from lxml import etree

    with zipfile.ZipFile(path) as zf:
        name, root, body = _docx_body(zf)
        blocks = _docx_blocks(body)
        offset = _docx_pages_before(blocks[:first - 1])
        # unstructured numbers no page in a file without rendered breaks: a part with
        # none of its own, of a document that has some, lies on the page after offset
        unnumbered = 1 + offset if _docx_pages_before(blocks) else None
        _part_sections(body, blocks, first, last)
        for b in blocks[:first - 1] + blocks[last:]:
            body.remove(b)
        data = etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)
        _rewrite_zip(zf, out, {name: data})
    return offset, unnumbered


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


def _cut_listed(path: Path, first: int, last: int, out: Path, listed, what: str,
                tidy=None) -> tuple[int, None]:
    """Copy of the package with only items ``first..last`` of its list (``listed``:
    :func:`_pptx_slides` or :func:`_xlsx_sheets`), ``tidy(root)`` applied to the main
    part; returns the items before the range (the page offset)."""
    from lxml import etree

    with zipfile.ZipFile(path) as zf:
        name, root, lst, items = listed(zf)
        for item in items[:first - 1] + items[last:]:
            lst.remove(item)
        if tidy is not None:
            tidy(root)
        data = etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)
        _rewrite_zip(zf, out, {name: data})
    return first - 1, None


def pptx_weights(path: Path) -> list[int]:
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


def cut_pptx(path: Path, first: int, last: int, out: Path) -> tuple[int, None]:
    return _cut_listed(path, first, last, out, _pptx_slides, "slides")


# ------------------------------------------------------------------ XLSX
def _xlsx_sheets(zf: zipfile.ZipFile):
    return _listed_parts(zf, "xl/workbook.xml", _S, "sheets", "sheet")


def xlsx_weights(path: Path) -> list[int]:
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


def cut_xlsx(path: Path, first: int, last: int, out: Path) -> tuple[int, None]:
    return _cut_listed(path, first, last, out, _xlsx_sheets, "sheets", _tidy_workbook)


# ------------------------------------------------------------------ shared
def _rewrite_zip(zf: zipfile.ZipFile, out: Path, replaced: dict[str, bytes]) -> None:
    """Copy ``zf`` to ``out`` with the members in ``replaced`` given new bytes."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in zf.infolist():
            data = replaced.get(info.filename)
            if data is None:
                data = zf.read(info)
            dst.writestr(copy.copy(info), data, compress_type=zipfile.ZIP_DEFLATED)
