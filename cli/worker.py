"""``ragstream worker`` and ``ragstream topics``: run the stage workers (the stream
runtime in :mod:`streams.worker`) and create the catalogue's topics.
"""
from __future__ import annotations

import asyncio

import typer
from rich.console import Console

from streams.settings import get_settings


def register(app: typer.Typer, console: Console) -> None:
    """Add ``worker`` and ``topics`` to the main ``ragstream`` command."""

    @app.command()
    def worker(stages: str = typer.Option("all", help="comma-separated stages, or 'all'"),
               loglevel: str = typer.Option("warning"),
               autoscale: bool = typer.Option(False, "--autoscale",
                                              help="add/remove consumer processes per stage from its lag "
                                                   "(RAGSTREAM_AUTOSCALE_* settings)")) -> None:
        """Run stage workers: one stage in this process (its consumer group
        ``ragstream-<stage>``), or several/all as one supervised process per stage;
        with ``--autoscale`` each stage runs as many processes as its lag calls for."""
        from streams.app import STAGES, UnknownStage, check_stages
        from streams.worker import run_worker

        chosen = list(STAGES) if stages == "all" else [s.strip() for s in stages.split(",") if s.strip()]
        try:  # a misspelt stage in a Procfile, compose file or manifest: one line, not a traceback
            if not chosen:  # else a supervisor of nothing would run for ever
                raise UnknownStage(f"--stages names no stage; choose from {list(STAGES)} or 'all'")
            check_stages(chosen)
        except UnknownStage as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        raise typer.Exit(run_worker(chosen, loglevel=loglevel, autoscale=autoscale))

    @app.command()
    def topics() -> None:
        """Create the catalogue's topics on the broker (idempotent)."""
        from topics.admin import ensure_topics

        s = get_settings()
        created = asyncio.run(ensure_topics(s.kafka_bootstrap, s.topic_partitions))
        console.print(f"created: {created or 'none (all existed)'}")
