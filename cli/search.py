"""``ragstream search "query"``: a project's top-k chunks with score, file, page and
text, the rankings that ran and whether the cross-encoder reranked them (the search
itself is :func:`search.query.search`); ``--json`` prints one JSON object instead
(:func:`result_json`), and ``--category/--document/--page-from/--page-to`` and
``--metadata-filter '{"team": "ops"}'`` (search/metadata_filter.py) narrow it;
``--alias test`` searches the collection behind the project's test alias.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from streams.settings import get_settings


def print_hits(hits: list[dict[str, Any]], console: Console) -> None:
    """Search hits as a table: score, file and version, page, text (first 240 chars).
    A chunk of a file without pages (HTML, DOCX, TXT, ...) is stored with page 0 and
    shown with page "-"."""
    table = Table("score", "file", "page", "text", show_lines=True)
    for h in hits:
        text = " ".join(h["text"].split())
        page = str(h["page_number"]) if int(h["page_number"] or 0) > 0 else "-"
        table.add_row(f"{h['score']:.3f}", f"{h['filename']}\nv{h['version']}", page,
                      text[:240] + ("…" if len(text) > 240 else ""))
    console.print(table)


def result_json(query: str, project: str, k: int, result) -> dict[str, Any]:
    """A :class:`search.query.SearchResult` as one JSON-ready object: ``query``,
    ``project``, ``k``, ``rankers``, ``reranked``, ``fallback_reason`` and ``hits``
    (each: ``chunk_id``, ``document_id``, ``version``, ``filename``, ``page_number``
    (0 for a file without pages),
    ``element_types`` as a list, ``category``, ``text``, ``score``, ``dense_score``,
    ``metadata``: the version's user metadata or null)."""
    hits = [{"chunk_id": h["chunk_id"], "document_id": h["document_id"], "version": int(h["version"]),
             "filename": h["filename"], "page_number": int(h["page_number"]),
             "element_types": [t for t in str(h.get("element_types", "")).split(",") if t],
             "category": h.get("category"), "text": h["text"], "score": float(h["score"]),
             "dense_score": None if h.get("dense_score") is None else float(h["dense_score"]),
             "metadata": h.get("metadata")}
            for h in result.hits]
    return {"query": query, "project": project, "k": k, "rankers": list(result.rankers),
            "reranked": bool(result.reranked), "fallback_reason": result.fallback_reason, "hits": hits}


def register(app: typer.Typer, console: Console) -> None:
    """Add ``search`` to the main ``ragstream`` command."""

    @app.command()
    def search(query: str, project: str = typer.Option("default", "--project", "-p"),
               k: int = typer.Option(5, "-k"),
               as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
               category: Optional[str] = typer.Option(None, "--category", "-c", help="only this category"),
               document: Optional[str] = typer.Option(None, "--document", help="only this document id"),
               page_from: Optional[int] = typer.Option(None, "--page-from", min=1, help="first page (inclusive)"),
               page_to: Optional[int] = typer.Option(None, "--page-to", min=1, help="last page (inclusive)"),
               metadata_filter: Optional[str] = typer.Option(
                   None, "--metadata-filter",
                   help='user metadata filter, a JSON object: {"team": "ops"} (equality), '
                        '{"year": {"$gte": 2020}} (operators as in POST /v1/search)'),
               mode: str = typer.Option("hybrid", "--mode", help="hybrid (dense + BM25) or dense"),
               alias: str = typer.Option("prod", "--alias",
                                         help="prod (chunks_P) or test (chunks_P__test, made by reindex --alias test)")
               ) -> None:
        """Search a project's chunks (dense + BM25, reranked when a cross-encoder is
        configured); prints score, document, page and text, or JSON with --json."""
        from search.query import SearchFilters, search as run_search

        if mode not in ("hybrid", "dense"):
            typer.echo(f"error: --mode must be hybrid or dense, not {mode!r}", err=True)
            raise typer.Exit(code=2)
        if alias not in ("prod", "test"):
            typer.echo(f"error: --alias must be prod or test, not {alias!r}", err=True)
            raise typer.Exit(code=2)
        from cli.arguments import project_or_exit
        from schemas.user_metadata import InvalidMetadata
        from search.metadata_filter import parse_filter

        project_or_exit(project)

        try:
            spec = parse_filter(metadata_filter) if metadata_filter is not None else None
        except InvalidMetadata as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=2) from exc
        filters = SearchFilters(category=category, document_id=document, page_from=page_from, page_to=page_to,
                                metadata=spec)
        try:
            result = asyncio.run(run_search(query, project=project, k=k, settings=get_settings(),
                                            filters=filters, mode=mode, alias=alias))
        except LookupError as exc:  # no test alias yet
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=2) from exc
        if as_json:
            typer.echo(json.dumps(result_json(query, project, k, result), ensure_ascii=False))
            return
        print_hits(result.hits, console)
        how = " + ".join(result.rankers)
        console.print(f"ranked by {how}" + (f" ({result.fallback_reason})" if result.fallback_reason else ""))
