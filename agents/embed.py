"""embed stage: ``enhanced-chunks`` → ``embeddings``.

Batches across documents (``stream.take_events(max_batch, within=delay)``) and embeds
each batch in one call (Triton or in-process ONNX Runtime, by settings.embedder).
Vectors: float32, 384 dimensions, L2-normalised.
"""
from __future__ import annotations

from typing import Sequence

from agents.context import StageContext
from agents.runner import Stage
from schemas import Chunk, DocumentStatus, EmbeddedChunk
from topics import ENHANCED

STAGE = "embed"


async def embed_batch(ctx: StageContext, chunks: Sequence[Chunk]) -> None:
    """Embed a batch of chunks and send one EmbeddedChunk each."""
    for chunk in chunks:
        if chunk.index == 0:
            await ctx.emit(chunk, DocumentStatus.EMBEDDING, stage=STAGE, chunks_total=chunk.total)
    embedder = await ctx.resources.embedder()
    vectors = await embedder.embed([c.embed_text or c.text for c in chunks])
    model = getattr(embedder, "model_name", "all-MiniLM-L6-v2")
    for chunk, vector in zip(chunks, vectors):
        await ctx.topics.embeddings.send(key=chunk.document_id, value=EmbeddedChunk(
            **chunk.asdict(), vector=vector.tolist(), embedding_model=model))


def stage(ctx: StageContext) -> Stage:
    """embed: batches of ``embed_max_batch`` within ``embed_batch_within_s``."""
    return Stage(STAGE, ENHANCED, embed_batch,
                 batch=(ctx.settings.embed_max_batch, ctx.settings.embed_batch_within_s))
