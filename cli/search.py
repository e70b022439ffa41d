"""``ragstream search "query"``: a project's top-k chunks with score, file, page and
text, and whether the cross-encoder reranked them (the search itself is
:func:`search.query.search`).
"""
from __future__ import annotations

import asyncio
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from streams.settings import get_settings


def print_hits(hits: list[dict[str, Any]], console: Console) -> None:
    """Search hits as a table: score, file, page, document, text (first 300 chars)."""
    table = Table("score", "file", "page", "text", show_lines=True)
    for h in hits:
        text = " ".join(h["text"].split())
        table.add_row(f"{h['score']:.3f}", f"{h['filename']}\nv{h['version']}", str(h["page_number"]),
                      text[:240] + ("…" if len(text) > 240 else ""))
    console.print(table)


def register(app: typer.Typer, console: Console) -> None:
    """Add ``search`` to the main ``ragstream`` command."""

    @app.command()
    def search(query: str, project: str = typer.Option("default", "--project", "-p"),
               k: int = typer.Option(5, "-k")) -> None:
        """Search a project's chunks; prints score, document, page and text."""
        from search.query import search as run_search

        result = asyncio.run(run_search(query, project=project, k=k, settings=get_settings()))
        print_hits(result.hits, console)
        console.print("reranked by the cross-encoder" if result.reranked
                      else f"not reranked ({result.fallback_reason}): reciprocal rank fusion of dense + lexical")
