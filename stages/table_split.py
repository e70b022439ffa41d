"""Splitting a table into pieces whose embed text fits, the header in every piece.

A table's embed text is its rendering (``stages.enhance.render_table``: the header
once, then one ``column: value`` line per row).  A table whose rendering fits stays
one piece with its HTML untouched.  Otherwise :func:`split_table` packs consecutive
body rows greedily into pieces, each an HTML table of the header row plus its own
rows, so every piece renders (and embeds) only its rows under the column names.

A row too big for a piece on its own (wide tables, long cells) is split into groups
of columns, each a two-row table (those header cells, that row's cells); a single
cell that still does not fit, or a table without parsable rows, becomes plain text
pieces (``html`` None, embedded as they are) cut by :func:`stages.split.split_text`.

:func:`pack_table` cuts the same way by text length alone, in linear time: the
partition stage's bound on one element (``RAGSTREAM_MAX_ELEMENT_CHARS``), applied to a
table of any size before the chunk stage's finer, token-counted split.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from lxml import html as lxml_html

from stages.enhance import cell_text, render_table
from stages.split import Fits, split_text


@dataclass(frozen=True)
class TablePiece:
    """One piece of a table: ``html`` (str | None — None for a plain-text piece) and
    ``text`` (its cells, a row per line; the chunk text)."""

    html: Optional[str]
    text: str


def _cells(tr) -> list:
    return [c for c in tr if c.tag in ("td", "th")]


def _rows(table_html: str) -> list:
    """The ``<tr>`` elements ``stages.enhance.table_rows`` reads (rows with text)."""
    try:
        root = lxml_html.fromstring(table_html)
    except Exception:  # lxml raises several types on garbage, as in table_rows
        return []
    return [tr for tr in root.iter("tr") if any(cell_text(c) for c in _cells(tr))]


def _html(el) -> str:
    """One element (a row or a cell) as HTML, without the text that follows it."""
    return lxml_html.tostring(el, encoding="unicode", with_tail=False)


def _table(*row_htmls: str) -> str:
    return "<table>" + "".join(row_htmls) + "</table>"


def _text(*rows: list) -> str:
    return "\n".join(" ".join(t for t in map(cell_text, cells) if t) for cells in rows)


def split_table(table_html: Optional[str], fallback_text: str, fits: Fits) -> list[TablePiece]:
    """Pieces of one table, in order, each with ``fits(embed text)``.

    ``fits`` is the check on what the embed stage will read: the piece's rendering
    (``render_table(piece.html, piece.text)``), or ``piece.text`` when ``html`` is
    None.  A table that fits whole is ``[TablePiece(table_html, fallback_text)]``.
    Without parsable rows the table's ``fallback_text`` is split as plain text
    (keeping ``table_html`` when it fits whole).  Every body row lands in exactly one
    piece (or its cells in several column-group pieces), in document order.
    """
    if not table_html:
        return [TablePiece(None, p) for p in split_text(fallback_text, fits)]
    if fits(render_table(table_html, fallback_text)):
        return [TablePiece(table_html, fallback_text)]
    rows = _rows(table_html)
    if len(rows) < 2:  # no rows, or a header alone that is too big: plain text
        return [TablePiece(None, p) for p in split_text(fallback_text, fits)]
    header, body = rows[0], rows[1:]
    head_html = _html(header)
    pieces: list[TablePiece] = []
    current: list = []

    def piece(trs: list) -> TablePiece:
        return TablePiece(_table(head_html, *map(_html, trs)),
                          _text(_cells(header), *(_cells(tr) for tr in trs)))

    def ok(p: TablePiece) -> bool:
        return fits(render_table(p.html, p.text))

    for tr in body:
        if current and ok(piece(current + [tr])):
            current.append(tr)
            continue
        if current:
            pieces.append(piece(current))
        if ok(piece([tr])):
            current = [tr]
        else:
            pieces += _split_row(_cells(header), _cells(tr), fits)
            current = []
    if current:
        pieces.append(piece(current))
    return pieces


def _split_row(head: list, row: list, fits: Fits) -> list[TablePiece]:
    """One row as column groups: two-row tables (header cells, row cells), greedy."""
    n = max(len(head), len(row))

    def cell_html(cells: list, i: int, tag: str) -> str:
        return _html(cells[i]) if i < len(cells) else f"<{tag}></{tag}>"

    def group(idx: list[int]) -> TablePiece:
        h = "<tr>" + "".join(cell_html(head, i, "th") for i in idx) + "</tr>"
        r = "<tr>" + "".join(cell_html(row, i, "td") for i in idx) + "</tr>"
        sub = [[head[i] for i in idx if i < len(head)], [row[i] for i in idx if i < len(row)]]
        return TablePiece(_table(h, r), _text(*sub))

    def ok(p: TablePiece) -> bool:
        return fits(render_table(p.html, p.text))

    pieces: list[TablePiece] = []
    current: list[int] = []
    for i in range(n):
        if current and ok(group(current + [i])):
            current.append(i)
            continue
        if current:
            pieces.append(group(current))
        if ok(group([i])):
            current = [i]
        else:  # one cell too big even alone: its text, labelled with its column
            label = cell_text(head[i]) if i < len(head) else ""
            value = cell_text(row[i]) if i < len(row) else ""
            text = f"{label}: {value}" if label else value
            pieces += [TablePiece(None, p) for p in split_text(text, fits)]
            current = []
    if current:
        pieces.append(group(current))
    return pieces


def pack_table(table_html: Optional[str], fallback_text: str, max_chars: int) -> list[TablePiece]:
    """Pieces of one table whose ``text`` is at most ``max_chars`` characters, in time
    linear in the table's size (the partition stage's bound on one element).

    A table whose ``fallback_text`` fits is ``[TablePiece(table_html, fallback_text)]``.
    Otherwise body rows are packed greedily by their text length into HTML tables
    headed by the first row; a row too long on its own becomes groups of its cells
    (two-row tables, header cells over row cells), and a cell still too long (a
    170 KB quoted CSV field, say) becomes plain text pieces (``html`` None) of
    ``"column: value"`` cut by :func:`stages.split.split_text`.  Without parsable rows,
    or with a first row longer than half a piece, ``fallback_text`` is cut as plain text.
    Every cell's text lands in exactly one piece, in document order.
    """
    def fits(s: str) -> bool:
        return len(s) <= max_chars

    if fits(fallback_text):
        return [TablePiece(table_html, fallback_text)]
    rows = _rows(table_html) if table_html else []
    head_text = _text(_cells(rows[0])) if rows else ""
    if len(rows) < 2 or len(head_text) > max_chars // 2:
        return [TablePiece(None, p) for p in split_text(fallback_text, fits)]
    header = _cells(rows[0])
    head_html = _html(rows[0])
    pieces: list[TablePiece] = []
    group: list[tuple[str, str]] = []  # (row html, row text)

    def flush() -> None:
        if group:
            pieces.append(TablePiece(_table(head_html, *(h for h, _ in group)),
                                     "\n".join([head_text] + [t for _, t in group])))
            group.clear()

    size = len(head_text)
    for tr in rows[1:]:
        text = _text(_cells(tr))
        if group and size + 1 + len(text) > max_chars:
            flush()
            size = len(head_text)
        if len(head_text) + 1 + len(text) <= max_chars:
            group.append((_html(tr), text))
            size += 1 + len(text)
        else:
            flush()
            pieces += _pack_row(header, _cells(tr), max_chars)
    flush()
    return pieces


def _pack_row(head: list, row: list, max_chars: int) -> list[TablePiece]:
    """One long row as groups of cells (greedy by text length), a cell that does not
    fit alone as plain text pieces labelled with its column."""
    pieces: list[TablePiece] = []
    group: list[int] = []
    sizes = [0, 0]  # characters of the group's header line and row line, spaces included

    def flush() -> None:
        if group:
            h = "<tr>" + "".join(_html(head[i]) if i < len(head) else "<th></th>" for i in group) + "</tr>"
            r = "<tr>" + "".join(_html(row[i]) for i in group) + "</tr>"
            pieces.append(TablePiece(_table(h, r), _text([head[i] for i in group if i < len(head)],
                                                         [row[i] for i in group])))
            group.clear()
            sizes[:] = [0, 0]

    for i, cell in enumerate(row):
        label = cell_text(head[i]) if i < len(head) else ""
        value = cell_text(cell)
        grown = [sizes[0] + bool(sizes[0] and label) + len(label), sizes[1] + bool(sizes[1] and value) + len(value)]
        if grown[0] + 1 + grown[1] <= max_chars:
            group.append(i)
            sizes[:] = grown
            continue
        flush()
        if len(label) + 1 + len(value) <= max_chars:
            group.append(i)
            sizes[:] = [len(label), len(value)]
        else:
            text = f"{label}: {value}" if label else value
            pieces += [TablePiece(None, p) for p in split_text(text, lambda s: len(s) <= max_chars)]
    flush()
    return pieces
