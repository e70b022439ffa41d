"""``ragstream requeue``: queue stranded document versions again (adapters/stranded.py)."""
from __future__ import annotations

import asyncio
import json
from typing import Optional

import typer
from rich.console import Console


def register(app: typer.Typer, console: Console) -> None:
    """Add ``requeue`` to the main ``ragstream`` command."""

    @app.command()
    def requeue(stuck_for_h: float = typer.Option(144.0, "--stuck-for-h", min=0.0,
                                                  help="hours without an outcome or a status change "
                                                       "(default 144: just under the intermediate "
                                                       "topics' 7-day retention)"),
                project: Optional[str] = typer.Option(None, "--project", "-p", help="only this project"),
                dry_run: bool = typer.Option(False, "--dry-run", help="list them, change nothing"),
                as_json: bool = typer.Option(False, "--json", help="one JSON object")) -> None:
        """Queue again the versions whose records were lost before a stage read them
        (sent, no outcome, no delete, no status change for --stuck-for-h hours): their
        ledger steps are forgotten and the normalize worker's upload sweep sends them
        again from their raw objects.  Exit 2 when PostgreSQL does not answer."""
        from adapters.pg_pool import create_pool
        from adapters.stranded import requeue as reset, stranded_versions
        from cli.arguments import project_or_exit
        from streams.settings import get_settings

        if project is not None:
            project_or_exit(project)
        settings = get_settings()

        async def run() -> tuple[list[dict], int]:
            pool = await create_pool(settings.pg_dsn, min_size=1, max_size=2)
            try:
                found = await stranded_versions(pool, stuck_for_h * 3600, project)
                return found, (0 if dry_run else await reset(pool, found))
            finally:
                await pool.close()

        found, count = asyncio.run(run())  # PostgreSQL down: one line, exit 2 (cli/unreachable.py)
        if as_json:
            typer.echo(json.dumps({"stranded": [{"document_id": v["document_id"], "version": v["version"],
                                                 "status": v["status"]} for v in found],
                                   "requeued": count, "dry_run": dry_run}))
            return
        for v in found:
            console.print(f"{v['document_id']} v{v['version']}: {v['status'] or 'no status'} "
                          f"since {(v['status_at'] or v['queued_at']):%Y-%m-%d %H:%M} UTC")
        console.print(f"{len(found)} stranded; {'none requeued (--dry-run)' if dry_run else f'{count} requeued'}")
