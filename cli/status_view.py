"""Rendering status for people: one line per transition, a table per document."""
from __future__ import annotations

import time
from typing import Any, Iterable

from rich.table import Table

from schemas import StatusEvent

COLOURS = {"COMPLETED": "green", "FAILED": "red", "DELETED": "magenta", "QUEUED": "cyan"}


def transition_line(ev: StatusEvent) -> str:
    """``HH:MM:SS  doc-…  v1  PARTITIONING  file.pdf  [chunks 3/10] [error]`` (rich markup)."""
    colour = COLOURS.get(ev.status, "yellow")
    parts = [time.strftime("%H:%M:%S", time.localtime(ev.at)), ev.document_id, f"v{ev.version}",
             f"[{colour}]{ev.status:<12}[/{colour}]", ev.filename]
    if ev.chunks_total:
        parts.append(f"chunks {ev.chunks_done}/{ev.chunks_total}" if ev.chunks_done
                     else f"chunks {ev.chunks_total}")
    if ev.error:
        parts.append(f"[red]{ev.error}[/red]")
    return "  ".join(parts)


def documents_table(rows: Iterable[dict[str, Any]]) -> Table:
    """A rich table of projected ``documents`` rows."""
    table = Table("document", "file", "version", "status", "stage", "chunks", "updated", "error")
    for r in rows:
        colour = COLOURS.get(r["status"], "yellow")
        table.add_row(r["document_id"], r["filename"], str(r["version"]),
                      f"[{colour}]{r['status']}[/{colour}]", r["stage"], str(r["chunks_total"]),
                      r["updated_at"].strftime("%H:%M:%S"), r["error"] or "")
    return table
