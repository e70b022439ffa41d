"""DOCX story parts rewritten to what Word shows, before python-docx reads them.

python-docx (and unstructured's ``partition_docx`` on top of it) reads a paragraph's
text from its *direct* ``w:r`` / ``w:hyperlink`` children, a story's blocks from its
direct ``w:p`` / ``w:tbl`` children and a table's rows from its direct ``w:tr``
children.  Text that Word shows inside any other wrapper was silently dropped, and
span counts were trusted:

* tracked changes: an insertion is ``w:ins`` around runs, a move ``w:moveTo`` —
  every inserted and moved-to word was lost (R1-docx-tracked-changes.docx);
* content controls: ``w:sdt`` around a paragraph, inside one, around a table row or
  a cell, nested at will — all lost (R2-docx-content-controls.docx); the same holds
  for ``w:customXml``, ``w:smartTag``, ``w:fldSimple`` (a field's shown result),
  ``w:dir`` and ``w:bdo``;
* ``w:gridSpan`` is expanded one grid column at a time (``range(tc.grid_span)`` in
  python-docx's ``_Row.cells``): a 2×2 table with ``gridSpan="1000000000"`` took
  274 s and 7.3 GB, then lost a row (R13-docx-gridspan-1e9.docx); unstructured also
  loops over ``w:gridBefore`` / ``w:gridAfter`` (a table nested in a cell with such
  counts lost its text from the HTML to a swallowed MemoryError under a 3 GiB cap);
  a vertical merge (``w:vMerge``) is resolved by recursing one row up per
  "continue" cell, so one merged column over 600 rows took 20 s, over 1,000 rows
  57 s, and the last 21 rows lost their cells to a (swallowed) RecursionError.

:func:`rewritten` parses each story part (main document, headers, footers,
footnotes, endnotes, comments: found by content type) with a safe lxml parser
(no entities, no network; ``huge_tree`` as python-docx gets it from
``stages.parser_options``) and, only when something changes, writes a copy of the
package with:

1. revisions accepted: ``w:del`` and ``w:moveFrom`` removed with their content
   (``w:delText`` / ``w:delInstrText`` never kept), ``w:ins`` / ``w:moveTo``
   unwrapped, deleted rows (``w:trPr/w:del``) and cells (``w:cellDel``) removed, a
   paragraph whose mark is deleted (``w:pPr/w:rPr/w:del`` or ``w:moveFrom``) joined
   to the following paragraph as Word does on "Accept all", every ``w:*Change``
   (the old properties) and the move range markers dropped;
2. containers unwrapped: each element listed above replaced by its content
   (``w:sdt`` by the children of its ``w:sdtContent``) at body, paragraph, run, row
   and cell level, nested too (iteratively: nesting depth costs no stack);
3. spans clamped: per table, the bound is its grid width (count of ``w:gridCol``,
   or the most cells of any row when that is larger; at least 1); ``w:gridBefore``,
   each ``w:gridSpan`` and ``w:gridAfter`` of a row are lowered only where the row
   would pass the bound (a row within it is unchanged); unreadable values become 1
   (spans) or 0 (before/after).  A vertical merge longer than
   :data:`MAX_VMERGE_ROWS` rows is undone: its "continue" cells become ordinary
   empty cells, the merged text stays once, in its first row (python-docx would
   repeat it in every row of the HTML; unstructured's ``Table.text`` has it once
   either way).

Measured (2-core machine): R13 now takes 0.9 s in ``partition_file`` (4.1 s for a
fresh process, imports included; before: 274 s, 7.3 GB) with a peak RSS of 0.48 GB
under an 8 GiB address-space cap; the rewrite itself takes 21 ms.  The 1,000-row
merge takes 0.9 s.  A package that needs none of this is returned as is, after one
parse of each story part (48 ms for the 11 MB ``document.xml`` of
huge-text-run-11M.docx).  Nesting is bounded by libxml2 (2,048 levels even with
``huge_tree``): ~1,000 nested content controls are unwrapped, deeper ones still fail
the document as "corrupt" (python-docx cannot parse the part either).

Decisions:

* Comments: unstructured does not read ``word/comments.xml``, so comment text stays
  out of the elements as before; the part is still rewritten (accepted view) so a
  later reader of it gets no deleted text.  Comment anchors in the body are kept.
* Hidden text (``w:vanish``, ``w:specVanish``, ``w:webHidden``) is kept: unlike a
  deletion it is current content the author left in the document (notes, answer
  keys, index entries, form labels) and searching for it should find it; python-docx
  reads it too.  Deleted text is different: after "Accept all" it is not in the
  document at all, so it must never be searchable.
* Placeholder text of an empty content control (``w:showingPlcHdr``) is kept, as
  Word shows it.  Word also wraps a table of contents, a cover page and page-number
  footers in content controls: their text (with the cached page numbers) now comes
  out like any other paragraph.
"""
from __future__ import annotations

import logging
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_CT = "{http://schemas.openxmlformats.org/package/2006/content-types}"
STORY_TYPES = tuple(f"wordprocessingml.{k}+xml" for k in (
    "document.main", "template.main", "header", "footer", "footnotes", "endnotes", "comments"))
MACRO_STORY_TYPES = ("application/vnd.ms-word.document.macroEnabled.main+xml",
                     "application/vnd.ms-word.template.macroEnabledTemplate.main+xml")

#: rows a vertical merge may span before it is undone (python-docx walks up one row
#: per "continue" cell, recursively: n rows cost ~n²/2 XPath calls and n stack frames)
MAX_VMERGE_ROWS = 64

_REVISION_MARKS = ("ins", "del", "moveFrom", "moveTo")
_CHANGES = ("rPrChange", "pPrChange", "sectPrChange", "tblPrChange", "tblPrExChange",
            "trPrChange", "tcPrChange", "tblGridChange", "numberingChange",
            "moveFromRangeStart", "moveFromRangeEnd", "moveToRangeStart", "moveToRangeEnd",
            "delText", "delInstrText", "cellIns", "cellMerge")
#: wrapper → its property child, dropped when it is unwrapped (None: none)
_WRAPPERS = {"ins": None, "moveTo": None, "customXml": "customXmlPr", "smartTag": "smartTagPr",
             "fldSimple": "fldData", "dir": None, "bdo": None}


def w(tag: str) -> str:
    """``"p"`` → ``"{W}p"`` (Clark notation in the WordprocessingML namespace)."""
    return f"{{{W}}}{tag}"


def _parser():
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


def story_parts(zf: zipfile.ZipFile) -> list[str]:
    """Zip member names of the story parts of a DOCX package, from ``[Content_Types].xml``
    overrides (``[]`` when it is missing or unreadable)."""
    from lxml import etree

    try:
        root = etree.fromstring(zf.read("[Content_Types].xml"), _parser())
    except (KeyError, etree.XMLSyntaxError):
        return []
    names = set(zf.namelist())
    out = []
    for o in root.iter(f"{_CT}Override"):
        ctype, part = o.get("ContentType") or "", (o.get("PartName") or "").lstrip("/")
        if (ctype.endswith(STORY_TYPES) or ctype in MACRO_STORY_TYPES) and part in names:
            out.append(part)
    return out


def rewritten(path: Path, out_dir: Path) -> Path:
    """``path`` itself when no story part of the DOCX package needs a change (or it is
    not a readable zip); otherwise a rewritten copy ``out_dir/accepted.docx``."""
    from lxml import etree

    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        return path
    with zf:
        changed: dict[str, bytes] = {}
        for name in story_parts(zf):
            try:
                root = etree.fromstring(zf.read(name), _parser())
            except etree.XMLSyntaxError:
                continue  # python-docx reports it
            if rewrite_part(root):
                changed[name] = etree.tostring(root, xml_declaration=True, encoding="UTF-8",
                                               standalone=True)
        if not changed:
            return path
        out = Path(out_dir) / "accepted.docx"
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in zf.infolist():
                dst.writestr(info, changed.get(info.filename) or zf.read(info))
    log.info("%s: accepted revisions, unwrapped containers, clamped spans in %s",
             Path(path).name, ", ".join(sorted(changed)))
    return out


def rewrite_part(root) -> int:
    """Rewrite one story part's element tree in place (see the module docstring);
    returns the number of changes (0: the part was left as it was)."""
    n = unwrap_containers(root)  # first: a deleted paragraph mark joins the next w:p,
    return n + accept_revisions(root) + clamp_spans(root)  # also one out of a w:sdt


def _is_mark(el) -> bool:
    """A revision element inside a property element (a paragraph mark's ``w:rPr``, a
    row's ``w:trPr``) marks its owner; elsewhere it wraps content."""
    parent = el.getparent()
    return parent is not None and isinstance(parent.tag, str) and parent.tag.endswith("Pr")


def _remove(el) -> None:
    parent = el.getparent()
    if parent is not None:
        parent.remove(el)


def accept_revisions(root) -> int:
    """Accept every tracked change in ``root`` (``w:ins`` / ``w:moveTo`` content is
    unwrapped by :func:`unwrap_containers`, run first); returns the count of changes."""
    n = 0
    for el in list(root.iter(*(w(t) for t in _CHANGES))):
        _remove(el)
        n += 1
    for el in list(root.iter(w("del"), w("moveFrom"))):
        if not _is_mark(el):  # content deleted or moved away
            _remove(el)
            n += 1
    for el in list(root.iter(*(w(t) for t in _REVISION_MARKS))):
        if el.getparent() is None or not _is_mark(el):
            continue
        owner = el.getparent().getparent()  # rPr → pPr, or trPr → tr
        deleted = el.tag in (w("del"), w("moveFrom"))
        _remove(el)
        n += 1
        if deleted and owner is not None and owner.tag == w("tr"):
            _remove(owner)
        elif deleted and owner is not None and owner.tag == w("pPr"):
            _join_next(owner.getparent())
    for tc in list(root.iter(w("tc"))):
        if tc.find(f"{w('tcPr')}/{w('cellDel')}") is not None:
            _remove(tc)
            n += 1
    return n


def _join_next(p) -> None:
    """Accept a deleted paragraph mark: ``p``'s content moves to the start of the next
    paragraph (whose properties the joined paragraph keeps) and ``p`` goes.  With no
    paragraph right after it (a table, the end of a cell or story) ``p`` stays."""
    nxt = p.getnext() if p is not None else None
    if p is None or nxt is None or nxt.tag != w("p"):
        return
    ppr = nxt.find(w("pPr"))
    anchor_index = 1 if ppr is not None else 0
    for child in reversed([c for c in p if c.tag != w("pPr")]):
        nxt.insert(anchor_index, child)
    _remove(p)


def _unwrap(el, keep) -> None:
    """Replace ``el`` by the children of ``keep`` (``el`` itself or a child), in place."""
    for child in list(keep):
        el.addprevious(child)
    _remove(el)


def unwrap_containers(root) -> int:
    """Replace every content control and inline wrapper by its content (see module
    docstring); returns the count unwrapped."""
    n = 0
    tags = [w("sdt")] + [w(t) for t in _WRAPPERS]
    for el in list(root.iter(*tags)):
        if el.getparent() is None or _is_mark(el):
            continue
        local = el.tag[len(W) + 2:]
        if local == "sdt":
            content = el.find(w("sdtContent"))
            if content is None:
                _remove(el)
            else:
                _unwrap(el, content)
        else:
            prop = _WRAPPERS[local]
            if prop is not None:
                for pr in el.findall(w(prop)):
                    el.remove(pr)
            _unwrap(el, el)
        n += 1
    return n


def _int(el, default: int) -> int:
    try:
        return int(el.get(w("val")))
    except (TypeError, ValueError):
        return default


def _set(el, value: int) -> int:
    """Write ``value`` as ``el``'s ``w:val``; 1 when that changed the text, else 0."""
    if el.get(w("val")) == str(value):
        return 0
    el.set(w("val"), str(value))
    return 1


def clamp_spans(root) -> int:
    """Clamp grid spans and undo long vertical merges in every table of ``root``;
    returns the count of values changed."""
    n = 0
    for tbl in list(root.iter(w("tbl"))):
        rows = tbl.findall(w("tr"))
        grid = len(tbl.findall(f"{w('tblGrid')}/{w('gridCol')}"))
        bound = max([1, grid] + [len(tr.findall(w("tc"))) for tr in rows])
        for tr in rows:
            n += _clamp_row(tr, bound)
        n += _undo_long_vmerges(rows)
    return n


def _clamp_row(tr, bound: int) -> int:
    n = 0
    tcs = tr.findall(w("tc"))
    before = tr.find(f"{w('trPr')}/{w('gridBefore')}")
    pos = 0
    if before is not None:
        old = _int(before, 0)
        pos = min(max(old, 0), max(bound - len(tcs), 0))
        n += _set(before, pos)
    for i, tc in enumerate(tcs):
        span = tc.find(f"{w('tcPr')}/{w('gridSpan')}")
        width = 1
        if span is not None:
            old = _int(span, 1)
            width = min(max(old, 1), max(bound - pos - (len(tcs) - i - 1), 1))
            n += _set(span, width)
        pos += width
    after = tr.find(f"{w('trPr')}/{w('gridAfter')}")
    if after is not None:
        old = _int(after, 0)
        n += _set(after, min(max(old, 0), max(bound - pos, 0)))
    return n


def _undo_long_vmerges(rows) -> int:
    """Remove ``w:vMerge`` from the "continue" cells of every vertical merge over
    :data:`MAX_VMERGE_ROWS` rows; returns the count of cells changed."""
    chains: dict[int, list] = {}  # grid offset → continue cells of the open merge there
    done: list[list] = []
    for tr in rows:
        before = tr.find(f"{w('trPr')}/{w('gridBefore')}")
        pos = _int(before, 0) if before is not None else 0
        seen = set()
        for tc in tr.findall(w("tc")):
            span = tc.find(f"{w('tcPr')}/{w('gridSpan')}")
            vmerge = tc.find(f"{w('tcPr')}/{w('vMerge')}")
            if vmerge is not None and vmerge.get(w("val"), "continue") == "continue":
                chains.setdefault(pos, []).append(vmerge)
                seen.add(pos)
            pos += _int(span, 1) if span is not None else 1
        for offset in [o for o in chains if o not in seen]:
            done.append(chains.pop(offset))
    done.extend(chains.values())
    n = 0
    for chain in done:
        if len(chain) > MAX_VMERGE_ROWS:
            for vmerge in chain:
                _remove(vmerge)
            n += len(chain)
    return n
