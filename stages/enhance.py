"""Enhance stage: the text each chunk is embedded and searched by.

Text chunks pass through.  Tables get a deterministic rendering of their HTML
(header once, then one ``col: value`` line per row) so that a question naming a
column finds the row; the HTML itself is kept on the chunk.  When a
vision-language model is configured (``agents.enhance``, ``adapters.vlm``), table and
image chunks also get its short summary, put before that rendering in the embed text
and cut so the whole stays within the embedder's word-piece limit
(:func:`with_summary`).
"""
from __future__ import annotations

from typing import Callable, Optional

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


def vlm_kind(element_types: list[str], table_html: Optional[str], image_keys: list) -> Optional[str]:
    """``"table"``, ``"image"`` or None: what a vision-language model would be asked
    to summarise for a chunk (tables with HTML, chunks with stored image crops)."""
    if table_html and "Table" in element_types:
        return "table"
    if image_keys:
        return "image"
    return None


def cut_words(text: str, max_words: int) -> str:
    """``text`` with white space collapsed, at most ``max_words`` words."""
    return " ".join(text.split()[:max_words])


def with_summary(summary: str, body: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """``summary`` + a blank line + ``body``, the summary cut (whole words from its
    end) so the result is at most ``max_tokens`` word pieces by ``count`` (special
    tokens included); the body is never cut (the chunk stage already sized it to the
    limit, so a full piece leaves the summary little room).  ``body`` alone when no
    word of the summary fits, or when the summary is empty."""
    words = summary.split()
    if not words:
        return body
    if count(body) >= max_tokens:
        return body
    lo, hi = 0, len(words)  # the most words whose text fits: binary search
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + "\n\n" + body) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + "\n\n" + body if lo else body
