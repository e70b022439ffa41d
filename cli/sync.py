"""``ragstream sync`` and ``ragstream delete``: keep a project in step with a folder or
an S3 prefix; delete one document.

    ragstream sync SOURCE -p PROJECT [-c CATEGORY] [--watch N] [--wait]
    ragstream delete DOCUMENT -p PROJECT [--wait]

A pass is :func:`streams.source_sync.sync_pass`; a delete is
:func:`streams.ingest.delete_document`, the path of the API's ``DELETE
/v1/documents/{id}``.  Heavy imports happen when a command runs.
"""
from __future__ import annotations

import asyncio
import signal
import time
from typing import Optional

import typer
from rich.console import Console

WAIT_HELP = "follow the status until each document queued is terminal"


def register(app: typer.Typer, console: Console) -> None:
    """Add ``sync`` and ``delete`` to the main ``ragstream`` command."""

    @app.command()
    def sync(source: str = typer.Argument(..., help="a folder, or s3://bucket/prefix"),
             project: str = typer.Option("default", "--project", "-p"),
             category: str = typer.Option("default", "--category", "-c"),
             watch: Optional[float] = typer.Option(
                 None, "--watch", min=1.0, help="poll every N seconds until SIGINT/SIGTERM"),
             wait: bool = typer.Option(False, "--wait", help=WAIT_HELP),
             timeout: float = typer.Option(900.0, help="seconds --wait waits per pass")) -> None:
        """Ingest what is new or changed in SOURCE, delete from the index what left it.

        Last line of each pass: ``sync added=… changed=… deleted=… unchanged=…`` (and
        ``failed=…`` when an object could not be read: each named with its reason
        on a line of its own; it is kept, not deleted).  Exit 0; 1 when the last
        pass failed or had failures (or --wait timed out); 2 for a bad argument or
        a source that cannot be reached."""
        raise typer.Exit(asyncio.run(run_sync(source, project=project, category=category,
                                              watch_s=watch, wait=wait, timeout_s=timeout,
                                              console=console)))

    @app.command()
    def delete(document: str = typer.Argument(
                   ..., help="the document's id in PROJECT (the scoped PROJECT.ID that ingest "
                             "and status print works too)"),
               project: str = typer.Option(..., "--project", "-p"),
               wait: bool = typer.Option(False, "--wait", help="follow until the document is DELETED"),
               timeout: float = typer.Option(300.0, help="seconds to wait with --wait")) -> None:
        """Delete one document of PROJECT (as DELETE /v1/documents/{id} does).

        Its chunks leave the index, its objects the store, its status becomes
        DELETED.  Exit 1 for a document PROJECT does not have (another project's
        documents are never reached), or a --wait timeout."""
        from cli.arguments import project_or_exit

        project_or_exit(project)
        raise typer.Exit(asyncio.run(run_delete(document, project=project, wait=wait,
                                                timeout_s=timeout, console=console)))


async def _wait_for(wanted: dict[str, int], console: Console, timeout_s: float, since: float,
                    until=None) -> bool:
    """Follow ``wanted`` (scoped id → version) to a state of ``until`` (default
    terminal); False after ``timeout_s`` seconds, naming what did not finish."""
    from cli.progress import follow_until_terminal
    from schemas import TERMINAL

    try:
        await follow_until_terminal(wanted, console, timeout_s, since=since, until=until or TERMINAL)
        return True
    except asyncio.TimeoutError:
        console.print(f"[red]timed out after {timeout_s:.0f} s; not finished: "
                      f"{', '.join(sorted(wanted))}[/red]", highlight=False, soft_wrap=True)
        return False


async def run_delete(document: str, *, project: str, wait: bool, timeout_s: float,
                     console: Console) -> int:
    """The ``ragstream delete`` command (exit code).  ``document`` is the project's own
    id; when PROJECT has none such and it starts with ``PROJECT.``, the rest is
    tried (the scoped form the CLI prints); when both exist the id is ambiguous and
    nothing is deleted (exit 1).  Never outside PROJECT."""
    from cli.progress import uploader
    from cli.status_view import shown
    from schemas import DocumentStatus
    from streams.ingest import DocumentNotFound, delete_document
    from streams.settings import get_settings

    settings = get_settings()
    started = time.time()
    candidates = [document]
    if document.startswith(f"{project}.") and len(document) > len(project) + 1:
        candidates.append(document[len(project) + 1:])
    async with uploader(settings) as (store, metadata, prod):
        if len(candidates) == 2:  # "P.x1" is the own id "P.x1" or the scoped form of "x1"
            from streams.document_ids import scoped_id

            async def exists(own_id: str) -> bool:
                try:
                    row = await metadata.latest_version(scoped_id(project, own_id))
                except ValueError:  # not an id at all
                    return False
                return bool(row) and row["project"] == project

            found = [c for c in candidates if await exists(c)]
            if len(found) == 2:
                console.print(f"[red]{shown(document)} is ambiguous in project {shown(project)}: the id "
                              f"{shown(candidates[0])} and the id {shown(candidates[1])} both exist; give "
                              f"the scoped id {shown(project + '.' + candidates[0])} or "
                              f"{shown(project + '.' + candidates[1])}[/red]", highlight=False, soft_wrap=True)
                return 1
            candidates = found or candidates
        for own_id in candidates:
            try:
                result = await delete_document(project=project, document_id=own_id, bucket=store.bucket,
                                               producer=prod, metadata=metadata)
                break
            except DocumentNotFound:
                continue
        else:
            console.print(f"[red]no document {shown(document)} in project {shown(project)}[/red]",
                          highlight=False, soft_wrap=True)
            return 1
    if not result.queued:
        console.print(f"already deleted  {shown(result.document_id)}  v{result.version}", highlight=False)
        return 0
    console.print(f"delete queued  {shown(result.document_id)}  v{result.version}", highlight=False)
    if wait and not await _wait_for({result.document_id: result.version}, console, timeout_s,
                                    started - 1.0, until={DocumentStatus.DELETED}):
        return 1
    return 0


def _stop_on_signals(stop: asyncio.Event) -> None:
    """SIGINT/SIGTERM set ``stop`` (the pass under way finishes); a second one ends
    the process at once."""
    loop = asyncio.get_running_loop()

    def first(sig: signal.Signals) -> None:
        stop.set()
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, first, sig)


async def run_sync(spec: str, *, project: str, category: str, watch_s: Optional[float], wait: bool,
                   timeout_s: float, console: Console) -> int:
    """The ``ragstream sync`` command: one pass, or one every ``watch_s`` seconds until
    SIGINT/SIGTERM; returns the exit code (see the command's help)."""
    from adapters.collection_names import InvalidProjectName, check_project
    from adapters.object_keys import check_category
    from adapters.source_listing import InvalidSource, open_source
    from cli.progress import uploader
    from cli.status_view import shown
    from streams.settings import get_settings
    from streams.source_sync import SyncBusy, sync_pass

    try:
        check_project(project)
        check_category(category)
    except (InvalidProjectName, ValueError) as exc:
        console.print(f"[red]{shown(exc)}[/red]", highlight=False)
        return 2

    def notify(kind: str, path: str, detail: str) -> None:
        sep = ": " if kind == "failed" else "  "
        console.print(f"{kind:>8}  {shown(path)}{sep}{shown(detail)}", highlight=False, soft_wrap=True)

    settings = get_settings()
    stop = asyncio.Event()
    if watch_s:
        _stop_on_signals(stop)
    code = 0
    try:
        async with uploader(settings) as (store, metadata, prod), open_source(spec, settings) as source:
            while True:
                started = time.time()
                try:
                    report = await sync_pass(source, project=project, category=category, store=store,
                                             metadata=metadata, producer=prod, notify=notify,
                                             track=wait)
                except (InvalidSource, SyncBusy) as exc:
                    console.print(f"[red]sync stopped, nothing deleted: {shown(exc)}[/red]",
                                  highlight=False, soft_wrap=True)
                    code = 1
                except Exception as exc:  # an outage: --watch tries again next pass
                    if not watch_s:
                        raise
                    console.print(f"[red]pass failed ({type(exc).__name__}: {shown(exc)}); "
                                  f"next in {watch_s:g} s[/red]", highlight=False, soft_wrap=True)
                    code = 1
                else:
                    done = not (wait and report.queued) or await _wait_for(
                        report.queued, console, timeout_s, started - 1.0)
                    console.print(report.line(), highlight=False)
                    code = 0 if done and not report.failed else 1
                if not watch_s or stop.is_set():
                    return code
                try:
                    await asyncio.wait_for(stop.wait(), watch_s)
                except asyncio.TimeoutError:
                    pass
                if stop.is_set():
                    return code
    except InvalidSource as exc:
        console.print(f"[red]{shown(exc)}[/red]", highlight=False, soft_wrap=True)
        return 2
