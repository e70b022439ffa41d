"""``ragstream drill``: fault drills against the embedded stack (the drills
themselves are in :mod:`drills`).
"""
from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Add ``drill`` to the main ``ragstream`` command."""

    @app.command()
    def drill(docs: int = typer.Option(30, help="documents per drill (mixed sizes, one split PDF)"),
              only: Optional[str] = typer.Option(None, help="comma-separated drill names (default: all)"),
              seed: int = typer.Option(1, help="seed for the corpus and the fault moments"),
              json_out: bool = typer.Option(False, "--json", help="also write a JSON report ({data_dir}/drill/report.json)"),
              outage: float = typer.Option(8.0, help="seconds a restarted service stays down"),
              timeout: float = typer.Option(900.0, help="per-drill deadline for terminal states (s)"),
              stall: float = typer.Option(150.0, help="fail a drill after this long without progress (s)")) -> None:
        """Fault drills against the embedded stack; last line drills_passed=n/m lost=… (drills/drill.py)."""
        from drills.drill import drill_main

        raise typer.Exit(drill_main(docs, only, seed, json_out, outage, timeout, stall))
