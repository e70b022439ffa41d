"""embed stage: ``enhanced-chunks`` → ``embeddings``.

Batches across documents (``stream.take_events(max_batch, within=delay)``) and embeds
each batch in one call (Triton or in-process ONNX Runtime, by settings.embedder).
Vectors: float32, 384 dimensions, L2-normalised.  A chunk whose exact embed text was
embedded before by the same model is not embedded again: its vector comes from the
embedding cache in PostgreSQL (adapters/embedding_cache.py, keyed by sha256 of the
embedder's ``cache_identity()`` — a digest of the model actually loaded and its token
limit, adapters/model_identity.py — and the text), so a new version that changes one
page embeds only the changed chunks.  Embedded chunks keep their lane
(topics/lanes.py) on ``embeddings``;
``ragstream_embed_cache_total{result="hit"|"miss"}`` counts chunks each way.
"""
from __future__ import annotations

from typing import Sequence

from adapters.embedding_cache import embed_cached
from adapters.erasure import record_cache_uses
from agents.context import StageContext
from agents.runner import Stage
from schemas import Chunk, DocumentStatus, EmbeddedChunk
from streams.metrics import EMBED_CACHE
from topics import ENHANCED
from topics.lanes import lane_partition

STAGE = "embed"


async def embed_batch(ctx: StageContext, chunks: Sequence[Chunk]) -> None:
    """Embed a batch of chunks (``embed_text``, else ``text``; cached vectors reused)
    and send one EmbeddedChunk each."""
    for chunk in chunks:
        if chunk.index == 0:
            await ctx.emit(chunk, DocumentStatus.EMBEDDING, stage=STAGE, chunks_total=chunk.total)
    embedder = await ctx.resources.embedder()
    model = getattr(embedder, "model_name", "all-MiniLM-L6-v2")
    cache = await ctx.resources.embedding_cache()
    result = await embed_cached([c.embed_text or c.text for c in chunks], embedder, cache,
                                await embedder.cache_identity())
    # which cache rows each version used: a delete erases them (adapters/erasure.py)
    await record_cache_uses(cache.pool, [(c.document_id, c.version, k)
                                         for c, k in zip(chunks, result.keys)])
    EMBED_CACHE.labels(result="miss").inc(result.embedded)
    EMBED_CACHE.labels(result="hit").inc(result.cached)
    vectors = result.vectors
    partitions = await ctx.partition_count(ctx.topics.embeddings)
    for chunk, vector in zip(chunks, vectors):
        # the chunk's lane again (topics/lanes.py), so the index stage serves it in turn
        partition = lane_partition(chunk.document_id, chunk.total, partitions,
                                   ctx.settings.fair_small_document_chunks, bulk=chunk.bulk)
        await ctx.topics.embeddings.send(key=chunk.document_id, partition=partition, value=EmbeddedChunk(
            **chunk.asdict(), vector=vector.tolist(), embedding_model=model))


def stage(ctx: StageContext) -> Stage:
    """embed: batches of ``embed_max_batch`` within ``embed_batch_within_s``."""
    return Stage(STAGE, ENHANCED, embed_batch,
                 batch=(ctx.settings.embed_max_batch, ctx.settings.embed_batch_within_s))
