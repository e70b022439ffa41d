"""index stage: ``embeddings`` → Milvus, and completion of document versions.

Batched upserts (primary key = chunk id, so redelivery changes nothing).  After a
batch, every version it touched is checked against the ledger, which is written
synchronously (never the lagging status projection):

- deleted meanwhile → the chunks just written are removed again (a delete wins
  against in-flight work, issue 8 failure 7);
- superseded by a newer COMPLETED version, or FAILED meanwhile → its chunks go;
- all ``total`` chunks of the version stored → COMPLETED is claimed and announced
  once (agents/outcomes.py), which removes the older versions' chunks.

A version's chunks reach this stage in order (one document's records share a
partition), so the batch holding its last chunk (``index == total - 1``) comes after
every other one: only that batch counts the version's stored chunks (a Strong
``count(*)``, one per version, not one per batch that touches it), and a count
below ``total`` then is a stale read, not work still to come.  Nothing would count again, and the version would stay INDEXING for good (seen
once, 2026-12-03: Milvus Lite's count missed rows during a flush; see
adapters/vector_store.py).  So that count is repeated after :data:`RECOUNT_WAITS_S`;
still short, the version fails (``internal``) with the counts in its reason instead
of hanging.

Written rows are flushed (sealed) at most every ``index_flush_interval_s`` seconds
per project, trailing the last write: Milvus Lite rebuilds the indexes of unsealed
rows — BM25 included — on every search, so an unflushed corpus of a few hundred
chunks answers a hybrid query in ~0.5–0.8 s instead of ~20 ms (measured with
``ragstream bench search --chunks 300 [--no-flush]``, 2026-11-30, 2 cores).  One
flush per interval, not per document, keeps segments few.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Sequence

from agents.context import StageContext
from agents.outcomes import complete_version
from agents.runner import Stage
from adapters.metadata import versions_metadata
from adapters.vector_store import chunk_row
from schemas import DocumentStatus, EmbeddedChunk
from stages.errors import InternalError
from topics import EMBEDDINGS

STAGE = "index"
log = logging.getLogger(__name__)
# seconds between the counts of a version whose last chunk is stored but whose count
# is short (about 8 s in all; a Milvus Lite flush takes well under a second)
RECOUNT_WAITS_S = (0.2, 0.5, 1.0, 2.0, 4.0)


async def recount(count: Callable[[], Awaitable[int]], total: int, first: int,
                  waits: Sequence[float] = RECOUNT_WAITS_S) -> int:
    """Count again after each of ``waits`` (seconds) until ``count()`` reaches
    ``total``; ``first`` is the short count that started it.  Returns the count
    reached (≥ ``total``).

    Raises:
        InternalError: still short after the last wait; the reason gives the counts.
    """
    stored = first
    for wait in waits:
        await asyncio.sleep(wait)
        stored = await count()
        if stored >= total:
            log.warning("index: a count of %d of %d chunks was stale; %d on a later count",
                        first, total, stored)
            return stored
    raise InternalError(f"only {stored} of {total} chunks are stored after the last one was "
                        f"written (counted {len(waits) + 1} times over {sum(waits):g} s)")


class TrailingFlush:
    """Flushes each written project once, ``interval_s`` seconds after the first
    write since its last flush (so at most one flush per interval per project, and
    the last write is always flushed).  A failed flush is logged and dropped: it
    costs search speed, never data (the rows are already written)."""

    def __init__(self, flush_sync, interval_s: float) -> None:
        self._flush_sync = flush_sync
        self.interval_s = interval_s
        self._pending: dict[str, asyncio.Task] = {}

    def written(self, project: str) -> None:
        """Note a write to ``project``; schedules its flush unless one is pending."""
        if self.interval_s < 0 or project in self._pending:
            return
        self._pending[project] = asyncio.ensure_future(self._flush_later(project))

    async def _flush_later(self, project: str) -> None:
        try:
            await asyncio.sleep(self.interval_s)
            del self._pending[project]
            await asyncio.to_thread(self._flush_sync, project)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 — a flush only speeds up search
            log.warning("index: flush of project %s failed: %s", project, exc)


async def settle_version(ctx: StageContext, chunk: EmbeddedChunk) -> None:
    """After an upsert of ``chunk``'s version: undo it if the version is no longer
    wanted, else complete the version when all its chunks are stored."""
    ledger = (await ctx.resources.metadata()).ledger
    vectors = ctx.resources.vectors
    state = await ledger.state(chunk.document_id, chunk.version)
    if state.deleted:
        await vectors.delete_versions_below(chunk.project, chunk.document_id, state.deleted_up_to + 1)
        return
    if state.current_completed > chunk.version:
        await vectors.delete_versions_below(chunk.project, chunk.document_id, state.current_completed)
        return
    if state.outcome is not None and state.outcome.outcome == "FAILED":
        await vectors.delete_version(chunk.project, chunk.document_id, chunk.version)
        return
    if state.outcome is not None and state.outcome.announced:
        return
    if chunk.index != chunk.total - 1:
        # not the batch holding the version's last chunk: the version cannot be
        # whole yet (its chunks arrive in order), so no Strong count is spent on it
        return

    def count() -> Awaitable[int]:
        return vectors.count(chunk.project, chunk.document_id, chunk.version)

    stored = await count()
    if stored < chunk.total:
        stored = await recount(count, chunk.total, stored)
    if stored >= chunk.total:
        await complete_version(ctx, chunk, chunks=stored, stage=STAGE)


async def index_batch(ctx: StageContext, chunks: Sequence[EmbeddedChunk],
                      flusher: TrailingFlush | None = None) -> None:
    """Upsert a batch into Milvus (grouped by project), note the writes with
    ``flusher``, then settle its versions."""
    for chunk in chunks:
        if chunk.index == 0:
            await ctx.emit(chunk, DocumentStatus.INDEXING, stage=STAGE, chunks_total=chunk.total)
    metadata = await ctx.resources.metadata()
    user_metadata = await versions_metadata(metadata.pool, {(c.document_id, c.version) for c in chunks})
    by_project: dict[str, list[dict]] = {}
    for chunk in chunks:
        by_project.setdefault(chunk.project, []).append(
            chunk_row(chunk, user_metadata.get((chunk.document_id, chunk.version))))
    for project, rows in by_project.items():
        await ctx.resources.vectors.upsert(project, rows)
        if flusher is not None:
            flusher.written(project)
    last_of_version: dict[tuple[str, int], EmbeddedChunk] = {}
    for chunk in chunks:  # the highest-index chunk of each version in the batch
        ref = (chunk.document_id, chunk.version)
        if ref not in last_of_version or chunk.index > last_of_version[ref].index:
            last_of_version[ref] = chunk
    for chunk in last_of_version.values():
        await settle_version(ctx, chunk)


def stage(ctx: StageContext) -> Stage:
    """index: batches of ``index_max_batch`` within ``index_batch_within_s``."""
    flusher = TrailingFlush(lambda project: ctx.resources.vectors.flush_sync(project),
                            ctx.settings.index_flush_interval_s)

    async def work(ctx: StageContext, chunks: Sequence[EmbeddedChunk]) -> None:
        await index_batch(ctx, chunks, flusher)

    return Stage(STAGE, EMBEDDINGS, work,
                 batch=(ctx.settings.index_max_batch, ctx.settings.index_batch_within_s))


def extras(app, ctx: StageContext) -> None:
    """Release the projects' collections this worker has not used for
    ``milvus_release_idle_s`` (adapters/idle_collections.py; 0: never)."""
    from adapters.idle_collections import sweep, sweep_interval

    idle_s = ctx.settings.milvus_release_idle_s
    if idle_s <= 0:
        return

    @app.timer(interval=sweep_interval(idle_s), name="ragstream-release-idle-collections")
    async def release_idle_collections() -> None:
        await sweep(ctx.resources.vectors, idle_s)
