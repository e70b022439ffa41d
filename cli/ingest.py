"""``ragstream ingest`` and ``ragstream status``: upload files and follow their
progress live; show the status projection or tail the status changelog.

    ragstream ingest PATH... [-p PROJECT] [-c CATEGORY] [--metadata JSON] [--force] [--no-wait]
    ragstream status [DOCUMENT] [--follow] [-p PROJECT] [--json]

The bodies are in :mod:`cli.progress`, imported when a command runs.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console


def register(app: typer.Typer, console: Console) -> None:
    """Add ``ingest`` and ``status`` to the main ``ragstream`` command."""

    @app.command()
    def ingest(paths: List[Path] = typer.Argument(..., exists=True, help="files or folders"),
               project: str = typer.Option("default", "--project", "-p"),
               category: str = typer.Option("default", "--category", "-c"),
               document_id: Optional[str] = typer.Option(None, help="only with a single file"),
               force: bool = typer.Option(False, help="re-send unchanged files"),
               metadata: Optional[str] = typer.Option(
                   None, "--metadata", help='user metadata for every file, a JSON object, e.g. '
                   '\'{"team": "ops", "year": 2024}\' (strings, numbers, booleans, ISO dates, string '
                   'lists); a changed value makes a new version of unchanged bytes'),
               wait: bool = typer.Option(True, help="follow status until every document is terminal"),
               timeout: float = typer.Option(900.0, help="seconds to wait for terminal states")) -> None:
        """Upload files to object storage and produce their upload events.

        ``--category`` must match ``[A-Za-z0-9_-]{1,64}`` and ``--document-id``
        ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}`` (the API's rules), ``--metadata`` a JSON
        object as schemas/user_metadata.py says: else exit 2, nothing sent."""
        from rich.markup import escape

        from adapters.object_keys import check_category
        from schemas.user_metadata import parse_metadata
        from streams.document_ids import check_document_id

        try:
            check_category(category)
            if document_id is not None:
                check_document_id(document_id)
            user_metadata = parse_metadata(metadata) if metadata is not None else None
        except ValueError as exc:
            console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
            raise typer.Exit(2) from None
        from cli.progress import ingest_paths

        raise typer.Exit(asyncio.run(ingest_paths(paths, project=project, category=category,
                                                  document_id=document_id, force=force, wait=wait,
                                                  timeout_s=timeout, console=console,
                                                  user_metadata=user_metadata)))

    @app.command()
    def status(document: Optional[str] = typer.Argument(
                   None, help="a document's scoped id PROJECT.ID, as ingest prints it"),
               follow: bool = typer.Option(False, "--follow", "-f", help="tail the status topic live"),
               project: Optional[str] = typer.Option(None, "--project", "-p"),
               as_json: bool = typer.Option(False, "--json",
                                            help="one JSON object per document (a line each with --follow)")) -> None:
        """Show documents' status (PostgreSQL projection) or tail the changelog live."""
        from cli.progress import show_status

        asyncio.run(show_status(document, follow=follow, project=project, console=console,
                                as_json=as_json))
