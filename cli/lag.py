"""``ragstream lag``: consumer lag per stage and partition (streams/lag.py), as a
table or ``--json``."""
from __future__ import annotations

import asyncio
import json
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table


def register(app: typer.Typer, console: Console) -> None:
    """Add ``lag`` to the main ``ragstream`` command."""

    @app.command()
    def lag(as_json: bool = typer.Option(False, "--json", help="one JSON list of rows"),
            stages: Optional[str] = typer.Option(None, help="comma-separated stages (default: all)")) -> None:
        """Per stage and partition: consumer group, topic, committed and end offsets,
        lag (messages) and the age of the oldest unprocessed record (seconds).
        Exit 2 when the broker does not answer."""
        from streams.app import STAGES, UnknownStage, check_stages
        from streams.lag import read_lag, stage_targets
        from streams.settings import get_settings

        try:
            chosen = check_stages([s.strip() for s in stages.split(",")]) if stages else list(STAGES)
        except UnknownStage as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        bootstrap = get_settings().kafka_bootstrap
        try:
            rows = asyncio.run(asyncio.wait_for(read_lag(bootstrap, stage_targets(chosen)), 30))
        except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
            typer.echo(f"error: broker {bootstrap}: {type(exc).__name__}: {exc}", err=True)
            raise typer.Exit(2) from None
        except Exception as exc:  # noqa: BLE001 — aiokafka's connection errors
            if type(exc).__module__.startswith("aiokafka"):
                typer.echo(f"error: broker {bootstrap}: {type(exc).__name__}: {exc}", err=True)
                raise typer.Exit(2) from None
            raise
        if as_json:
            typer.echo(json.dumps([r.as_dict() for r in rows]))
            return
        table = Table(title=f"consumer lag ({bootstrap})")
        for col in ("stage", "group", "topic", "part", "committed", "end", "lag", "oldest age s"):
            table.add_column(col, no_wrap=True, justify="left" if col in ("stage", "group", "topic")
                             else "right")
        for r in rows:
            group = r.group if r.group_exists else f"{r.group} (no commits)"
            table.add_row(r.stage, group, r.topic, str(r.partition),
                          "-" if r.committed is None else str(r.committed), str(r.end),
                          f"[bold red]{r.lag}[/]" if r.lag else "0",
                          f"{r.oldest_age_s:.1f}" if r.lag else "")
        Console(width=max(console.width, 130)).print(table)
