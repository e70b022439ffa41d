"""The search table (``cli/search.print_hits``, used by ``ragstream search`` and the
demo): a chunk of a file without pages (stored with page 0) shows page "-", a PDF
chunk its page number."""
from __future__ import annotations

from rich.console import Console

from cli.search import print_hits


def _hit(filename: str, page: int) -> dict:
    return {"score": 0.03, "filename": filename, "version": 1, "page_number": page,
            "text": f"text of {filename}"}


def _page_column(text: str) -> dict[str, str]:
    """filename -> the page cell of its row, read from the rendered table."""
    pages = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 4 and cells[1].endswith((".html", ".pdf")):
            pages[cells[1]] = cells[2]
    return pages


def test_pageless_chunks_show_a_dash_and_pdf_chunks_their_page():
    console = Console(record=True, width=120)
    print_hits([_hit("report.html", 0), _hit("report.pdf", 3)], console)
    assert _page_column(console.export_text()) == {"report.html": "-", "report.pdf": "3"}
