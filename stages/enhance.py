"""Enhance stage: the text each chunk is embedded and searched by.

Text chunks pass through.  Tables get a deterministic rendering of their HTML
(header once, then one ``col: value`` line per row) so that a question naming a
column finds the row; the HTML itself is kept on the chunk.  When a
vision-language model is configured (``agents.enhance``, ``adapters.vlm``), table and
image chunks also get its short summary, put before that rendering in the embed text
and cut so the whole stays within the embedder's word-piece limit
(:func:`with_summary`).

Every chunk's embed text starts with a contextual header (:func:`document_header`:
the document's name, words only, and its kind, e.g. ``"layout parser paper with
table (PDF document)"``), cut by whole words so header + text stay within the
embedder's word-piece limit (:func:`with_header`; the text is never cut, and a chunk
that already fills the limit gets no header).  A chunk deep in a document rarely
names it, so without the header a question that names the document ("the memo", "the
10-K") matches chunks of every document alike.  The header is in the embed text only:
the stored ``text`` (BM25, the reranker, what search returns) stays the document's own.
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath
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


#: a document's kind by its file extension, in the words a question would use
KIND_BY_EXTENSION = {
    "pdf": "PDF document", "doc": "Word document", "docx": "Word document",
    "odt": "text document", "rtf": "text document", "txt": "text document",
    "md": "Markdown document", "rst": "text document", "html": "web page", "htm": "web page",
    "xml": "XML document", "eml": "email", "msg": "email", "epub": "e-book",
    "ppt": "presentation", "pptx": "presentation", "odp": "presentation",
    "xls": "spreadsheet", "xlsx": "spreadsheet", "ods": "spreadsheet", "csv": "spreadsheet",
    "tsv": "spreadsheet", "jpg": "image", "jpeg": "image", "png": "image", "tif": "image",
    "tiff": "image", "bmp": "image", "heic": "image",
}


def document_header(filename: str) -> str:
    """The contextual header of a document's chunks: its base name without the
    extension, runs of ``-``, ``_``, ``.`` and white space as one space, then its kind
    in parentheses when the extension is known (:data:`KIND_BY_EXTENSION`):
    ``"pdf/fake-memo.pdf"`` → ``"fake memo (PDF document)"``; ``""`` → ``""``."""
    path = PurePosixPath(filename.replace("\\", "/"))
    name = " ".join(re.sub(r"[-_.\s]+", " ", path.stem).split())
    kind = KIND_BY_EXTENSION.get(path.suffix.lower().lstrip("."), "")
    if name and kind:
        return f"{name} ({kind})"
    return name or kind


def with_header(header: str, body: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """``header`` + a blank line + ``body``, the header cut by whole words from its
    end so the result is at most ``max_tokens`` word pieces by ``count`` (special
    tokens included); ``body`` alone when no word fits or the header is empty.  The
    body is never cut (:func:`with_summary`, whose rule this is)."""
    header = " ".join(header.split())
    if header and count(f"{header}\n\n{body}") <= max_tokens:  # the usual case: one count
        return f"{header}\n\n{body}"
    return with_summary(header, body, max_tokens, count)
