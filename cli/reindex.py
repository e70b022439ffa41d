"""``ragstream reindex -p P``: rebuild a project's Milvus collection by replaying its
retained topic into ``chunks_P__v{n+1}`` and swap an alias to it (the work is
:mod:`streams.reindex`); ``--rollback`` points the alias back at the collection its
last swap or promote replaced (else at the next-lower version), ``--promote`` points
prod at the test alias's collection, ``--show`` prints where the aliases point.

Prints a short report (collection, records replayed, chunks written, seconds,
``alias: old → new``), or one JSON object with ``--json``.  Exit 1 when the new
collection stayed incomplete (no alias moved), 2 for a usage error or a missing
collection/alias.
"""
from __future__ import annotations

import asyncio
import json
from typing import Optional

import typer
from rich.console import Console

from streams.settings import get_settings


def register(app: typer.Typer, console: Console) -> None:
    """Add ``reindex`` to the main ``ragstream`` command."""

    @app.command()
    def reindex(project: str = typer.Option(..., "--project", "-p"),
                embedder: Optional[str] = typer.Option(
                    None, "--embedder", help="embed again with this backend (onnx|triton) from enhanced-chunks; "
                                             "default: reuse the vectors of the embeddings topic"),
                alias: str = typer.Option("prod", "--alias", help="which alias to swap: prod (chunks_P) or test"),
                rollback: bool = typer.Option(False, "--rollback", help="undo the alias's last move: back to the "
                                                                        "collection its last swap or promote replaced "
                                                                        "(else the next-lower version)"),
                promote: bool = typer.Option(False, "--promote", help="point prod at the test alias's collection"),
                show: bool = typer.Option(False, "--show", help="print where the prod and test aliases point "
                                                                "and the collection versions; change nothing"),
                complete_within_s: float = typer.Option(120.0, "--complete-within", help="give up when the new "
                                                        "collection still lacks current chunks and the replay has "
                                                        "made no progress for this many seconds"),
                as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
        """Rebuild a project's index by replaying its topic into a new collection, then
        swap the alias (search keeps serving the old one until then)."""
        from streams import alias_moves, reindex as rx

        from cli.arguments import project_or_exit

        settings = get_settings()
        project_or_exit(project)
        if alias not in ("prod", "test"):
            typer.echo(f"error: --alias must be prod or test, not {alias!r}", err=True)
            raise typer.Exit(code=2)
        if embedder is not None and embedder not in ("onnx", "triton"):
            typer.echo(f"error: --embedder must be onnx or triton, not {embedder!r}", err=True)
            raise typer.Exit(code=2)
        if rollback and promote:
            typer.echo("error: --rollback and --promote exclude each other", err=True)
            raise typer.Exit(code=2)
        _check_milvus(settings)
        if show:
            where = alias_moves.aliases(project, settings=settings)
            typer.echo(json.dumps(where) if as_json else
                       f"prod → {where['prod'] or 'none'}; test → {where['test'] or 'none'}; versions {where['versions']}; "
                       f"--rollback: prod → {where['rollback']['prod'] or 'nothing to roll back to'}, "
                       f"test → {where['rollback']['test'] or 'nothing to roll back to'}")
            return
        try:
            if rollback or promote:
                before, after = asyncio.run(alias_moves.rollback(project, settings=settings, alias=alias) if rollback
                                            else alias_moves.promote(project, settings=settings))
                name = "test" if rollback and alias == "test" else "prod"
                out = {"project": project, "alias": name, "from": before, "to": after}
                typer.echo(json.dumps(out) if as_json else f"{name} alias of {project}: {before} → {after}")
                return
            report = asyncio.run(rx.reindex(project, settings=settings, embedder=embedder, alias=alias,
                                            complete_within_s=complete_within_s))
        except LookupError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=2) from exc
        except rx.ReindexIncomplete as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=1) from exc
        if as_json:
            typer.echo(json.dumps(report.as_dict()))
            return
        console.print(f"collection {report.collection} (topic {report.topic}, group {report.group})")
        console.print(f"records replayed {report.records_replayed} (catch-up {report.catch_up_records}), "
                      f"chunks written {report.chunks_written}, documents {report.documents}, "
                      f"pruned {report.pruned}, {report.seconds:.1f} s")
        console.print(f"swapped {report.alias}: {report.previous} → {report.collection}")


def _check_milvus(settings) -> None:
    """Open one Milvus connection without reconnect retries, so that a stopped stack
    ends the command at once in one line, exit 2 (``cli/main.py``, ``cli/unreachable.py``)
    instead of after the store's reconnect window (``RAGSTREAM_MILVUS_RECONNECT_S``,
    60 s, meant for workers riding out a Milvus restart) with a warning per attempt.
    Raises pymilvus's connection error (connect timeout 5 s)."""
    from adapters.vector_store import VectorStore

    store = VectorStore(settings.milvus_uri, reconnect_s=0)
    try:
        store.client  # noqa: B018 - opening the connection is the check
    finally:
        store.close()
