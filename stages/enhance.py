"""Enhance stage: the text each chunk is embedded and searched by.

Text chunks pass through.  Tables get a deterministic rendering of their HTML
(header once, then one ``col: value`` line per row) so that a question naming a
column finds the row; the HTML itself is kept on the chunk.  (A vision-language
model summary for tables and images is the configured-VLM path of a later issue.)
"""
from __future__ import annotations

from typing import Optional

from lxml import html as lxml_html


def cell_text(cell) -> str:
    """A ``<td>``/``<th>`` element's text, white space collapsed to single spaces."""
    return " ".join(cell.text_content().split())


def table_rows(table_html: str) -> list[list[str]]:
    """Cells of an HTML table as rows of stripped strings (empty list if unparsable)."""
    try:
        root = lxml_html.fromstring(table_html)
    except Exception:  # lxml raises several types on garbage; a rendering is best effort
        return []
    rows = []
    for tr in root.iter("tr"):
        cells = [cell_text(c) for c in tr if c.tag in ("td", "th")]
        if any(cells):
            rows.append(cells)
    return rows


def render_table(table_html: str, fallback_text: str = "") -> str:
    """A plain-text rendering of a table for embedding.

    ``Table. Columns: a | b | c`` then ``a: 1; b: 2; c: 3`` per data row, every row
    (no length cut: the chunk stage splits a table whose rendering would not fit the
    embedder, ``stages.table_split``); the chunk's own text when the HTML has no rows.
    """
    rows = table_rows(table_html)
    if not rows:
        return fallback_text
    header, body = rows[0], rows[1:]
    lines = ["Table. Columns: " + " | ".join(header)]
    for row in body:
        pairs = [f"{h or f'col{i + 1}'}: {v}" for i, (h, v) in enumerate(zip(header, row)) if v]
        pairs += row[len(header):]
        lines.append("; ".join(pairs))
    return "\n".join(lines)


def embed_text_for(text: str, element_types: list[str], table_html: Optional[str]) -> str:
    """What to embed for a chunk: its text, or a table rendering for table chunks."""
    if table_html and "Table" in element_types:
        return render_table(table_html, fallback_text=text)
    return text
