"""index stage: ``embeddings`` → Milvus, and completion of document versions.

Batched upserts (primary key = chunk id, so redelivery changes nothing).  After a
batch, every version it touched is checked against the ledger, which is written
synchronously (never the lagging status projection):

- deleted meanwhile → the chunks just written are removed again (a delete wins
  against in-flight work, issue 8 failure 7);
- superseded by a newer COMPLETED version, or FAILED meanwhile → its chunks go;
- all ``total`` chunks of the version stored → COMPLETED is claimed and announced
  once (agents/outcomes.py), which removes the older versions' chunks.

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
from typing import Sequence

from agents.context import StageContext
from agents.outcomes import complete_version
from agents.runner import Stage
from schemas import DocumentStatus, EmbeddedChunk
from topics import EMBEDDINGS

STAGE = "index"
log = logging.getLogger(__name__)


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


def _row(chunk: EmbeddedChunk) -> dict:
    return {
        "chunk_id": chunk.chunk_id, "vector": chunk.vector, "document_id": chunk.document_id,
        "version": chunk.version, "chunk_index": chunk.index, "page_number": chunk.page_number,
        "element_types": ",".join(chunk.element_types), "filename": chunk.filename,
        "project": chunk.project, "category": chunk.category, "text": chunk.text,
    }


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
    stored = await vectors.count(chunk.project, chunk.document_id, chunk.version)
    if stored >= chunk.total:
        await complete_version(ctx, chunk, chunks=stored, stage=STAGE)


async def index_batch(ctx: StageContext, chunks: Sequence[EmbeddedChunk],
                      flusher: TrailingFlush | None = None) -> None:
    """Upsert a batch into Milvus (grouped by project), note the writes with
    ``flusher``, then settle its versions."""
    for chunk in chunks:
        if chunk.index == 0:
            await ctx.emit(chunk, DocumentStatus.INDEXING, stage=STAGE, chunks_total=chunk.total)
    by_project: dict[str, list[dict]] = {}
    for chunk in chunks:
        by_project.setdefault(chunk.project, []).append(_row(chunk))
    for project, rows in by_project.items():
        await ctx.resources.vectors.upsert(project, rows)
        if flusher is not None:
            flusher.written(project)
    last_of_version = {(c.document_id, c.version): c for c in chunks}
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
