"""enhance stage: ``chunks`` → ``enhanced-chunks``.

Sets each chunk's ``embed_text``: the text itself, or a deterministic rendering of a
table (stages.enhance).  When a vision-language model is configured
(``settings.vlm_base_url``) and the chunk's profile has ``use_vlm``, a table or image
chunk is first summarised by it (``adapters.vlm``: the table piece's HTML, or the
image crops read from object storage): the summary is stored on the chunk
(``summary``) and put before the rendering in ``embed_text``, cut to the embedder's
word-piece limit (``stages.enhance.with_summary``).  A model that stays unavailable
after its retries never fails the document: the chunk goes on with the deterministic
rendering and ``enrichment = {"vlm": "failed", "reason": ...}``.  An image chunk's
own text is only a placeholder ("Image on page N") or OCR, so its summary is also put
before that text in ``text`` (what the index stores, BM25 and the reranker read); a table keeps its text.
Last, the document's contextual header (``stages.enhance.document_header``: its name
and kind) goes before all of ``embed_text``, cut to the same limit
(``stages.enhance.with_header``); ``text`` does not get it.
"""
from __future__ import annotations

import logging
from typing import Optional, Sequence

from adapters.object_keys import split_uri
from adapters.profiles_store import load_profile
from adapters.vlm import SUMMARY_WORDS, VlmClient, VlmRequest, VlmUnavailable
from agents.context import StageContext
from agents.runner import Stage
from schemas import Chunk, DocumentStatus
from stages.enhance import cut_words, document_header, embed_text_for, vlm_kind, with_header, with_summary
from stages.tokens import count_word_pieces
from topics import CHUNKS
from topics.lanes import lane_partition

STAGE = "enhance"
log = logging.getLogger(__name__)

_clients: dict[int, VlmClient] = {}  # one per StageContext (one per worker process)


def vlm_client(ctx: StageContext) -> Optional[VlmClient]:
    """The process's model client (its semaphore is the per-process concurrency
    limit), or None when ``settings.vlm_base_url`` is empty."""
    if not ctx.settings.vlm_base_url:
        return None
    client = _clients.get(id(ctx))
    if client is None:
        client = _clients[id(ctx)] = VlmClient(ctx.settings)
    return client


async def _request(ctx: StageContext, chunk: Chunk, kind: str) -> VlmRequest:
    """The model request for a table or image chunk (image crops read from S3)."""
    images = []
    if kind == "image":
        store = await ctx.resources.store()
        for uri in chunk.image_keys:
            bucket, key = split_uri(uri)
            mime = "image/jpeg" if key.endswith(".jpg") else f"image/{key.rsplit('.', 1)[-1]}"
            images.append((await store.get_bytes(key, bucket=bucket), mime))
    where = chunk.filename + (f", page {chunk.page_number}" if chunk.page_number else "")
    return VlmRequest(kind=kind, text=chunk.text, table_html=chunk.table_html, images=images,
                      where=where)


async def enrich(ctx: StageContext, chunk: Chunk, rendering: str) -> Chunk:
    """``chunk`` with ``embed_text``, plus ``summary``/``enrichment`` when the model
    is asked (see the module docstring).  Raises only what reading an image crop
    from object storage raises (the runner retries transient ones)."""
    client = vlm_client(ctx)
    kind = vlm_kind(chunk.element_types, chunk.table_html, chunk.image_keys)
    if client is None or kind is None \
            or not (await load_profile(chunk.category, ctx.settings.pg_dsn)).use_vlm:
        return chunk.derive(embed_text=rendering)
    request = await _request(ctx, chunk, kind)
    try:
        answer = await client.summarise(request)
    except VlmUnavailable as exc:
        log.warning("%s: no VLM summary for %s (%s); deterministic rendering",
                    STAGE, chunk.chunk_id, exc.reason)
        return chunk.derive(embed_text=rendering, enrichment={
            "vlm": "failed", "reason": exc.reason, "attempts": exc.attempts})
    summary = cut_words(answer.text, SUMMARY_WORDS)
    embed = with_summary(summary, rendering, ctx.settings.embedder_max_tokens, count_word_pieces)
    text = f"{summary}\n\n{chunk.text}" if kind == "image" else chunk.text
    return chunk.derive(text=text, embed_text=embed, summary=summary, enrichment={
        "vlm": "ok", "model": answer.model, "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens, "seconds": round(answer.seconds, 3)})


async def enhance_one(ctx: StageContext, chunk: Chunk) -> None:
    """Enhance one chunk and send it on."""
    if chunk.index == 0:
        await ctx.emit(chunk, DocumentStatus.ENHANCING, stage=STAGE, chunks_total=chunk.total)
    rendering = embed_text_for(chunk.text, chunk.element_types, chunk.table_html)
    enhanced = await enrich(ctx, chunk, rendering)
    enhanced = enhanced.derive(embed_text=with_header(
        document_header(chunk.filename), enhanced.embed_text, ctx.settings.embedder_max_tokens,
        count_word_pieces))
    partition = lane_partition(chunk.document_id, chunk.total,
                               await ctx.partition_count(ctx.topics.enhanced),
                               ctx.settings.fair_small_document_chunks, bulk=chunk.bulk)
    await ctx.topics.enhanced.send(key=chunk.document_id, partition=partition, value=enhanced)


async def enhance_batch(ctx: StageContext, chunks: Sequence[Chunk]) -> None:
    """Enhance each chunk of a batch in order and send it on (:func:`enhance_one`).

    Batched so that a document's chunks leave in a few produce requests rather than
    one each: on the embedded broker every produce request is a storage object that
    each later Fetch of the partition lists (broker quirk 6, README)."""
    for chunk in chunks:
        await enhance_one(ctx, chunk)


def stage(ctx: StageContext) -> Stage:
    """enhance: batches of ``enhance_max_batch`` chunks within ``enhance_batch_within_s``."""
    return Stage(STAGE, CHUNKS, enhance_batch,
                 batch=(ctx.settings.enhance_max_batch, ctx.settings.enhance_batch_within_s))
