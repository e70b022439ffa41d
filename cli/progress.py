"""The bodies of ``ragstream ingest`` and ``ragstream status`` (commands in
:mod:`cli.ingest`): upload files and follow their status transitions live until
each is terminal, show the status projection, tail the changelog.

:func:`ingest_and_follow` is also how the demo, the tests and the benchmarks ingest.
Imported only when a command runs (it pulls in the S3, PostgreSQL and Milvus clients).
"""
from __future__ import annotations

import asyncio
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Collection, Optional, Sequence

import orjson
from rich.console import Console

from adapters.metadata import Metadata
from adapters.migrations import upgrade_head
from adapters.object_store import ObjectStore
from schemas import TERMINAL, DocumentStatus
from streams.ingest import IngestResult, ingest_file
from adapters.document_keys import DocumentKeys
from streams.kafka_io import open_for_display, producer, tail_status
from cli.status_view import documents_table, shown, transition_line
from streams.settings import Settings, get_settings

STATUS_ROWS = 200  # documents `ragstream status -p P` shows, most recently updated first


def expand(paths: Sequence[Path]) -> list[Path]:
    """Files as given, folders expanded to their files (sorted, recursive, no dotfiles)."""
    return expand_paths(paths)[0]


def expand_paths(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """``(files, skipped)``: files as given and folders expanded to their files (sorted,
    recursive), and the dot-files (or files under dot-folders) the expansion skipped.
    A dot-file named explicitly is kept."""
    found, skipped = expand_with_sources(paths)
    return [f for f, _ in found], skipped


class DuplicateSourcePath(ValueError):
    """Two files of one ingest call would be the same document (same source path)."""


def expand_with_sources(paths: Sequence[Path]) -> tuple[list[tuple[Path, str]], list[Path]]:
    """As :func:`expand_paths`, each file with its *source path*: its path relative to
    the folder argument it was found under (``/``-separated, e.g. ``a/notes.txt``), or
    its name for a file given directly.  The default document id hashes the source
    path (streams/document_ids.py), so same-named files in two folders of one tree are
    two documents.  Raises DuplicateSourcePath naming both files when two arguments
    give the same source path (``ingest x/ y/`` with ``x/notes.txt`` and
    ``y/notes.txt``): ingest them one call each, or their common parent."""
    out: list[tuple[Path, str]] = []
    skipped: list[Path] = []
    for p in paths:
        if p.is_dir():
            for f in sorted(f for f in p.rglob("*") if f.is_file()):
                rel = f.relative_to(p)
                hidden = any(part.startswith(".") for part in rel.parts)
                if hidden:
                    skipped.append(f)
                else:
                    out.append((f, rel.as_posix()))
        else:
            out.append((p, p.name))
    first: dict[str, Path] = {}
    for f, source in out:
        if source in first and first[source].resolve() != f.resolve():
            raise DuplicateSourcePath(
                f"{first[source]} and {f} would be one document (both are {source!r} under the "
                "paths given): ingest their common parent folder, or each in its own call")
        first.setdefault(source, f)
    return out, skipped


@asynccontextmanager
async def uploader(settings: Settings) -> AsyncIterator[tuple[ObjectStore, Metadata, Any]]:
    """``(store, metadata, producer)`` of a process that uploads or deletes documents
    (ingest, delete, sync): the catalogue's topics made (in any start order: they
    may not exist yet), the schema at head, the bucket made; closed on exit."""
    from topics.admin import ensure_topics

    await ensure_topics(settings.kafka_bootstrap, settings.topic_partitions, timeout_s=settings.broker_wait_s)
    await upgrade_head(settings.pg_dsn)
    async with ObjectStore(settings) as store, Metadata(settings.pg_dsn) as metadata, \
            producer(settings.kafka_bootstrap) as prod:
        await store.ensure_bucket()
        yield store, metadata, prod


async def follow_until_terminal(wanted: dict[str, int], console: Console,
                                timeout_s: float, since: float = 0.0,
                                settings: Optional[Settings] = None,
                                last: Optional[dict[str, Any]] = None,
                                until: Collection[DocumentStatus] = TERMINAL) -> dict[str, Any]:
    """Print transitions of the ``{document_id: version}`` in ``wanted`` until each is
    in a state of ``until`` (default: terminal), ignoring events older than ``since``
    (Unix seconds); returns ``{document_id: last StatusEvent}``, kept in ``last``
    when given (so a caller still has it after a timeout).  Raises TimeoutError."""
    settings = settings or get_settings()
    last = {} if last is None else last

    async def _follow(keys: DocumentKeys) -> None:
        async for ev in tail_status(settings.kafka_bootstrap, from_beginning=True):
            if wanted.get(ev.document_id) != ev.version or ev.at < since:
                continue
            prev = last.get(ev.document_id)
            if prev is not None and prev.seq >= ev.seq:
                continue
            ev = await open_for_display(ev, keys)  # its file name is sealed on the topic
            last[ev.document_id] = ev
            console.print(transition_line(ev), highlight=False, soft_wrap=True)
            if all(d in last and DocumentStatus(last[d].status) in until for d in wanted):
                return

    async with Metadata(settings.pg_dsn) as metadata:
        await asyncio.wait_for(_follow(DocumentKeys(metadata.pool)), timeout_s)
    return last


@dataclass
class IngestOutcome:
    """Results of one ingest call: per-file results and each queued document's last
    status event (terminal unless ``timed_out``)."""

    results: list[IngestResult]
    last: dict[str, Any] = field(default_factory=dict)
    timed_out: bool = False

    def count(self, status: str) -> int:
        """How many queued documents ended in ``status``."""
        return sum(1 for e in self.last.values() if e.status == status)

    def pending_summary(self, wanted: dict[str, int]) -> str:
        """The queued documents not yet terminal, each as ``<id> v<n> <last status>
        (<file>)`` (``no status yet`` before the first event), comma-separated."""
        names = {r.document_id: r.path.name for r in self.results}
        parts = []
        for doc, version in wanted.items():
            ev = self.last.get(doc)
            if ev is not None and DocumentStatus(ev.status) in TERMINAL:
                continue
            parts.append(f"{doc} v{version} {ev.status if ev is not None else 'no status yet'} "
                         f"({names.get(doc, '?')})")
        return ", ".join(parts) or "none"


async def ingest_and_follow(paths: Sequence[Path], *, project: str, category: str,
                            document_id: Optional[str] = None, force: bool = False,
                            wait: bool = True, timeout_s: float = 900.0,
                            console: Console, settings: Optional[Settings] = None,
                            user_metadata: Optional[dict] = None) -> IngestOutcome:
    """Ingest files (folders expanded), printing one line per file; with ``wait``,
    print every status transition of the queued documents until all are terminal.
    ``settings`` defaults to the process settings (RAGSTREAM_* environment);
    ``user_metadata`` (validated) goes with every file (None: each keeps its latest
    version's)."""
    settings = settings or get_settings()
    found, skipped = expand_with_sources(paths)
    files = [f for f, _ in found]
    if skipped:
        console.print(f"skipped {len(skipped)} dot-file(s): "
                      + ", ".join(shown(str(f)) for f in skipped), highlight=False, soft_wrap=True)
    if document_id and len(files) != 1:
        raise ValueError("--document-id needs exactly one file")
    outcome = IngestOutcome([])
    started = time.time()
    async with uploader(settings) as (store, metadata, prod):
        for f, source in found:
            res = await ingest_file(f, project=project, category=category, store=store,
                                    metadata=metadata, producer=prod, document_id=document_id,
                                    force=force, source_path=source, user_metadata=user_metadata)
            outcome.results.append(res)
            verb = "queued" if res.queued else f"skipped ({res.reason})"
            console.print(f"{shown(verb):>18}  {res.document_id}  v{res.version}  {shown(str(f))}",
                          highlight=False, soft_wrap=True)
    wanted = {r.document_id: r.version for r in outcome.results if r.queued}
    if wait and wanted:
        try:
            await follow_until_terminal(wanted, console, timeout_s, since=started - 1.0,
                                        settings=settings, last=outcome.last)
        except asyncio.TimeoutError:
            outcome.timed_out = True
            console.print(f"[red]timed out after {timeout_s:.0f} s waiting for terminal states; "
                          f"not finished: {outcome.pending_summary(wanted)}[/red]",
                          highlight=False, soft_wrap=True)
    return outcome


async def ingest_paths(paths: Sequence[Path], *, project: str, category: str,
                       document_id: Optional[str], force: bool, wait: bool, timeout_s: float,
                       console: Console, user_metadata: Optional[dict] = None) -> int:
    """The ``ragstream ingest`` command: exit code 0 when every queued document reached
    a terminal state (or nothing was queued), 1 on timeout, 2 on bad arguments."""
    try:
        outcome = await ingest_and_follow(paths, project=project, category=category,
                                          document_id=document_id, force=force, wait=wait,
                                          timeout_s=timeout_s, console=console,
                                          user_metadata=user_metadata)
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        return 2
    if outcome.timed_out:
        return 1
    if outcome.last:
        partial = sum(1 for e in outcome.last.values() if e.status == "COMPLETED" and getattr(e, "partial", False))
        console.print(f"{outcome.count('COMPLETED')} completed" + (f" ({partial} partial)" if partial else "")
                      + f", {outcome.count('FAILED')} failed")
    return 0


def _json_line(obj: dict[str, Any]) -> None:
    """One JSON object on its own stdout line (timestamps ISO 8601, anything else
    orjson cannot write as its ``str``)."""
    sys.stdout.write(orjson.dumps(obj, default=str).decode() + "\n")
    sys.stdout.flush()


async def _follow_status(document: Optional[str], project: Optional[str], console: Console,
                         as_json: bool, keys: DocumentKeys) -> None:
    """``status --follow``: every status event (of ``document`` / ``project``) as a
    line or a JSON object, its sealed file name opened."""
    async for ev in tail_status(get_settings().kafka_bootstrap, from_beginning=True):
        if (document and ev.document_id != document) or (project and ev.project != project):
            continue
        ev = await open_for_display(ev, keys)
        if as_json:
            _json_line({k: v for k, v in ev.asdict().items() if k != "sealed"})
        else:
            console.print(transition_line(ev), highlight=False, soft_wrap=True)


async def show_status(document: Optional[str], *, follow: bool, project: Optional[str],
                      console: Console, as_json: bool = False) -> None:
    """Print the projection (one document or a project's), or tail the changelog;
    ``as_json``: one JSON object per document row (or per status event with
    ``follow``) on its own line, for scripts (a table is cut to the terminal width)."""
    settings = get_settings()
    if follow:
        async with Metadata(settings.pg_dsn) as metadata:
            await _follow_status(document, project, console, as_json, DocumentKeys(metadata.pool))
        return
    await upgrade_head(settings.pg_dsn)
    async with Metadata(settings.pg_dsn) as metadata:
        if document:
            row = await metadata.get_document(document)
            # -p narrows to that project's documents (the scoped id names its own)
            rows = [row] if row and (project is None or row["project"] == project) else []
        else:
            rows = await metadata.list_documents(project=project, limit=STATUS_ROWS)
    if as_json:
        for row in rows:  # jsonb columns (failed_parts) as JSON, not as their text
            _json_line({k: orjson.loads(v) if k == "failed_parts" and isinstance(v, str) else v
                        for k, v in dict(row).items()})
        return
    console.print(documents_table(rows))
    if not document and len(rows) == STATUS_ROWS:
        console.print(f"(the {STATUS_ROWS} most recently updated; `ragstream status DOC` shows any one)",
                      highlight=False)
