"""index stage: ``embeddings`` → Milvus, and completion of document versions.

Batched upserts (primary key = chunk id, so redelivery changes nothing).  After a
batch, every version it touched is checked against the ledger, which is written
synchronously (never the lagging status projection):

- deleted meanwhile → the chunks just written are removed again (a delete wins
  against in-flight work, issue 8 failure 7);
- superseded by a newer COMPLETED version, or FAILED meanwhile → its chunks go;
- all ``total`` chunks of the version stored → COMPLETED is claimed and announced
  once (agents/outcomes.py), which removes the older versions' chunks.
"""
from __future__ import annotations

from typing import Sequence

from agents.context import StageContext
from agents.outcomes import complete_version
from agents.runner import Stage
from schemas import DocumentStatus, EmbeddedChunk
from topics import EMBEDDINGS

STAGE = "index"


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


async def index_batch(ctx: StageContext, chunks: Sequence[EmbeddedChunk]) -> None:
    """Upsert a batch into Milvus (grouped by project), then settle its versions."""
    for chunk in chunks:
        if chunk.index == 0:
            await ctx.emit(chunk, DocumentStatus.INDEXING, stage=STAGE, chunks_total=chunk.total)
    by_project: dict[str, list[dict]] = {}
    for chunk in chunks:
        by_project.setdefault(chunk.project, []).append(_row(chunk))
    for project, rows in by_project.items():
        await ctx.resources.vectors.upsert(project, rows)
    last_of_version = {(c.document_id, c.version): c for c in chunks}
    for chunk in last_of_version.values():
        await settle_version(ctx, chunk)


def stage(ctx: StageContext) -> Stage:
    """index: batches of ``index_max_batch`` within ``index_batch_within_s``."""
    return Stage(STAGE, EMBEDDINGS, index_batch,
                 batch=(ctx.settings.index_max_batch, ctx.settings.index_batch_within_s))
