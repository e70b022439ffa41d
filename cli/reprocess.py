"""``ragstream reprocess``: run a project's live documents through the pipeline again
from their originals, each as a new version (streams/reprocess.py)."""
from __future__ import annotations

import asyncio
import json
from typing import Optional

import typer
from rich.console import Console


def register(app: typer.Typer, console: Console) -> None:
    """Add ``reprocess`` to the main ``ragstream`` command."""

    @app.command()
    def reprocess(project: str = typer.Option(..., "--project", "-p", help="the project"),
                  document_id: Optional[list[str]] = typer.Option(
                      None, "--document-id", help="only this document (repeatable; default: every live one)"),
                  wait: bool = typer.Option(True, help="follow status until every new version is terminal"),
                  timeout: float = typer.Option(900.0, help="seconds to wait for terminal states"),
                  as_json: bool = typer.Option(False, "--json", help="one JSON object at the end")) -> None:
        """Send every live document of the project (or the ones named) through the
        pipeline again, from the original in the object store, as a new version: after
        the topics were lost (PostgreSQL and raw/ kept), or to apply a parser or
        profile change.  Exit 1 on timeout, 2 for an unknown document or a bad name."""
        from cli.arguments import project_or_exit
        from cli.progress import follow_until_terminal, uploader
        from streams.document_ids import scoped_id
        from streams.ingest import DocumentNotFound
        from streams.reprocess import reprocess as send_again
        from streams.settings import get_settings

        project_or_exit(project)
        try:  # malformed ids refused before any service is asked
            for d in document_id or ():
                scoped_id(project, d)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=2)
        settings = get_settings()

        async def run() -> tuple[list, dict, bool]:
            async with uploader(settings) as (store, metadata, prod):
                sent = await send_again(project, store=store, metadata=metadata, producer=prod,
                                        document_ids=document_id or None)
            for r in sent:
                console.print(f"queued  {r.document_id}  v{r.previous} -> v{r.version}", highlight=False)
            last: dict = {}
            if wait and sent:
                wanted = {scoped_id(project, r.document_id): r.version for r in sent}
                try:
                    await follow_until_terminal(wanted, console, timeout, settings=settings, last=last)
                except asyncio.TimeoutError:
                    return sent, last, True
            return sent, last, False

        try:
            sent, last, timed_out = asyncio.run(run())
        except (DocumentNotFound, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=2)
        statuses = {doc: ev.status for doc, ev in last.items()}
        if as_json:
            typer.echo(json.dumps({"project": project, "timed_out": timed_out, "reprocessed": [
                {"document_id": r.document_id, "previous": r.previous, "version": r.version,
                 "status": statuses.get(scoped_id(project, r.document_id))} for r in sent]}))
        else:
            console.print(f"{len(sent)} document(s) sent again"
                          + (f"; {sum(s == 'COMPLETED' for s in statuses.values())} completed, "
                             f"{sum(s == 'FAILED' for s in statuses.values())} failed" if wait else ""))
        if timed_out:
            raise typer.Exit(code=1)
