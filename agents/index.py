"""index agent: ``embeddings`` → Milvus, and completion of document versions.

Batched upserts (primary key = chunk id, so redelivery changes nothing).  After a
batch, every version it touched is checked: when Milvus holds all ``total`` chunks
of a version, the older versions' chunks are deleted and COMPLETED is sent once
(``document_completions`` in PostgreSQL remembers it across redeliveries).
"""
from __future__ import annotations

from typing import Sequence

import faust

from agents.batches import run_batch
from agents.context import StageContext
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


async def complete_if_done(ctx: StageContext, chunk: EmbeddedChunk) -> None:
    """Complete ``chunk``'s version when all its chunks are indexed (once); if the
    document was deleted meanwhile, remove its chunks again instead."""
    metadata = await ctx.resources.metadata()
    row = await metadata.get_document(chunk.document_id)
    if row and row["status"] == "DELETED" and row["version"] >= chunk.version:
        # deleted while this version was in flight: drop what was just indexed
        await ctx.resources.vectors.delete_document(chunk.project, chunk.document_id)
        return
    if await metadata.is_completed(chunk.document_id, chunk.version):
        return
    stored = await ctx.resources.vectors.count(chunk.project, chunk.document_id, chunk.version)
    if stored < chunk.total:
        return
    await ctx.resources.vectors.delete_versions_below(chunk.project, chunk.document_id, chunk.version)
    await ctx.emit(chunk, DocumentStatus.COMPLETED, stage=STAGE, chunks_total=chunk.total,
                   chunks_done=stored)
    await metadata.record_completion(chunk.document_id, chunk.version, stored)


async def index_batch(ctx: StageContext, chunks: Sequence[EmbeddedChunk]) -> None:
    """Upsert a batch into Milvus (grouped by project), then complete finished versions."""
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
        await complete_if_done(ctx, chunk)


def register(app: faust.App, ctx: StageContext) -> None:
    """Declare the index agent on ``app``."""
    max_batch, within = ctx.settings.index_max_batch, ctx.settings.index_batch_within_s

    @app.agent(ctx.topics.embeddings, name="index")
    async def index(stream: faust.StreamT[EmbeddedChunk]) -> None:
        async for batch in stream.take(max_batch, within=within):
            await run_batch(ctx, stage=STAGE, source_topic=EMBEDDINGS.name, batch=batch,
                            work=lambda b: index_batch(ctx, b))
