"""Rendering status for people: one line per transition, a table per document."""
from __future__ import annotations

import time
from typing import Any, Iterable

from rich.markup import escape
from rich.table import Table

from schemas import StatusEvent
from stages.filenames import printable


def shown(text: Any) -> str:
    """``text`` safe for a rich terminal: control and bidi characters escaped
    (stages.filenames.printable), rich markup (``[red]``) escaped."""
    return escape(printable(str(text or "")))

COLOURS = {"COMPLETED": "green", "FAILED": "red", "DELETED": "magenta", "QUEUED": "cyan"}


def transition_line(ev: StatusEvent) -> str:
    """``HH:MM:SS  doc-…  v1  PARTITIONING  file.pdf  [chunks 3/10] [code: error]`` (rich
    markup; the file name and the error are escaped, :func:`shown`)."""
    colour = COLOURS.get(ev.status, "yellow")
    parts = [time.strftime("%H:%M:%S", time.localtime(ev.at)), shown(ev.document_id),
             f"v{ev.version}", f"[{colour}]{ev.status:<12}[/{colour}]", shown(ev.filename)]
    if ev.chunks_total:
        parts.append(f"chunks {ev.chunks_done}/{ev.chunks_total}" if ev.chunks_done
                     else f"chunks {ev.chunks_total}")
    if ev.error or ev.error_code:
        code = f"{ev.error_code}: " if ev.error_code else ""
        parts.append(f"[red]{shown(code + (ev.error or ''))}[/red]")
    if getattr(ev, "partial", False):
        parts.append("[yellow]partial: some parts failed (status --json lists them)[/yellow]")
    return "  ".join(parts)


def documents_table(rows: Iterable[dict[str, Any]]) -> Table:
    """A rich table of projected ``documents`` rows (``error_code`` when present)."""
    table = Table("document", "file", "version", "status", "stage", "chunks", "updated", "code",
                  "error")
    for r in rows:
        colour = COLOURS.get(r["status"], "yellow")
        status = r["status"] + (" (partial)" if r.get("partial") else "")
        table.add_row(shown(r["document_id"]), shown(r["filename"]), str(r["version"]),
                      f"[{colour}]{status}[/{colour}]", r["stage"], str(r["chunks_total"]),
                      r["updated_at"].strftime("%H:%M:%S"), shown(r.get("error_code")),
                      shown(r["error"]))
    return table
