"""embed agent: ``enhanced-chunks`` → ``embeddings``.

Batches across documents with ``stream.take(max_batch, within=delay)`` and embeds
each batch in one call (Triton or in-process ONNX Runtime, by settings.embedder).
Vectors: float32, 384 dimensions, L2-normalised.
"""
from __future__ import annotations

from typing import Sequence

import faust

from agents.batches import run_batch
from agents.context import StageContext
from schemas import Chunk, DocumentStatus
from topics import ENHANCED

STAGE = "embed"


async def embed_batch(ctx: StageContext, chunks: Sequence[Chunk]) -> None:
    """Embed a batch of chunks and send one EmbeddedChunk each."""
    from schemas import EmbeddedChunk

    for chunk in chunks:
        if chunk.index == 0:
            await ctx.emit(chunk, DocumentStatus.EMBEDDING, stage=STAGE, chunks_total=chunk.total)
    embedder = await ctx.resources.embedder()
    vectors = await embedder.embed([c.embed_text or c.text for c in chunks])
    model = getattr(embedder, "model_name", "all-MiniLM-L6-v2")
    for chunk, vector in zip(chunks, vectors):
        await ctx.topics.embeddings.send(key=chunk.document_id, value=EmbeddedChunk(
            **chunk.asdict(), vector=vector.tolist(), embedding_model=model))


def register(app: faust.App, ctx: StageContext) -> None:
    """Declare the embed agent on ``app``."""
    max_batch, within = ctx.settings.embed_max_batch, ctx.settings.embed_batch_within_s

    @app.agent(ctx.topics.enhanced, name="embed")
    async def embed(stream: faust.StreamT[Chunk]) -> None:
        async for batch in stream.take(max_batch, within=within):
            await run_batch(ctx, stage=STAGE, source_topic=ENHANCED.name, batch=batch,
                            work=lambda b: embed_batch(ctx, b))
