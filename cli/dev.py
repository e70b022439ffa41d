"""``ragstream dev up|down|status``: typer sub-app for the embedded dev stack.

Mount it in the main CLI with ``app.add_typer(dev_app, name="dev")``.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

import devstack
from streams.settings import get_settings

dev_app = typer.Typer(
    help="Embedded dev stack on loopback (Tansu broker, SeaweedFS S3, PostgreSQL, Milvus Lite).",
    no_args_is_help=True,
)
_console = Console()


def _table(statuses: dict[str, devstack.ServiceStatus]) -> Table:
    table = Table(title=f"ragstream dev stack ({get_settings().data_dir})")
    table.caption = f"logs: {Path(get_settings().data_dir).resolve() / 'logs'}"
    for col in ("service", "health", "pid", "endpoint", "detail"):
        table.add_column(col, overflow="fold")
    for st in statuses.values():
        health = "[green]healthy[/green]" if st.healthy else "[red]down[/red]"
        table.add_row(st.name, health, str(st.pid or "-"), st.endpoint, st.detail)
    return table


@dev_app.callback()
def _quiet() -> None:
    # health checks poll services that are still starting; aiokafka logs each refusal
    for noisy in ("aiokafka", "pymilvus"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)


@dev_app.command()
def up(
    service: Optional[list[str]] = typer.Argument(None, help="Services to start (default: all)."),
    timeout: float = typer.Option(120.0, help="Deadline for the whole stack, seconds."),
) -> None:
    """Start the services that are not healthy yet and wait until all are; then
    upgrade the database schema to head when PostgreSQL is among them."""
    t0 = time.monotonic()
    try:
        statuses = devstack.up(names=service or None, timeout_s=timeout)
    except devstack.DevStackError as exc:
        _console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1)
    _console.print(_table(statuses))
    if "postgres" in statuses:
        import asyncio

        from adapters.migrations import upgrade_head

        revision = asyncio.run(upgrade_head(get_settings().pg_dsn))
        _console.print(f"database schema at revision {revision} (adapters/migrations)")
    _console.print(f"up in {time.monotonic() - t0:.1f}s")


@dev_app.command()
def down(
    service: Optional[list[str]] = typer.Argument(None, help="Services to stop (default: all)."),
    grace: float = typer.Option(devstack.STOP_GRACE_S,
                                help="Seconds to wait after the graceful signal before SIGKILL."),
) -> None:
    """Stop the services started from this data_dir (data is kept)."""
    try:
        outcomes = devstack.down(names=service or None, grace_s=grace)
    except devstack.DevStackError as exc:
        _console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1)
    for name, outcome in outcomes.items():
        _console.print(f"{name}: {outcome}")


@dev_app.command()
def status(
    service: Optional[list[str]] = typer.Argument(None, help="Services to check (default: all)."),
) -> None:
    """Show per-service health; exit code 1 if any service is unhealthy."""
    statuses = devstack.status(names=service or None)
    _console.print(_table(statuses))
    if not all(st.healthy for st in statuses.values()):
        raise typer.Exit(1)
