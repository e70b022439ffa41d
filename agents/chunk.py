"""chunk stage: ``elements`` → ``chunks`` (one event per chunk).

Chunks in the process pool (``stages.chunk``: ``chunk_by_title``, every chunk's embed
text within the embedder's ``settings.embedder_max_tokens`` word pieces), writes the
processed output (the chunks as JSON) to ``processed/{project}/{document_id}/v{version}.json``,
then sends every chunk with its deterministic id.  A split PDF is chunked once,
when the event of its last stored page range arrives; the ledger's ``chunk`` step
keeps a second event that finds every range stored (ranges finishing together, a
redelivery) from chunking and embedding the document again.  When the document's
profile has ``use_vlm`` and a model is configured (``settings.vlm_base_url``), every
image partition stored becomes a chunk of its own after the others
(``stages.image_chunks``), for the enhance stage to have it described.
"""
from __future__ import annotations

import orjson

from adapters.failed_parts import failed_parts, record_failed_parts
from adapters.object_keys import elements_key, processed_key, work_prefix
from adapters.profiles_store import load_profile
from agents.context import StageContext
from agents.runner import Stage
from schemas import Chunk, DocumentStatus, ElementsReady, chunk_id
from stages.chunk import ChunkParams, chunk_elements, highest_page
from stages.errors import EmptyDocument, error_with_code
from stages.image_chunks import image_chunks
from stages.limits import check_count
from topics import ELEMENTS
from topics.lanes import lane_partition

STAGE = "chunk"
CHUNK_TIMEOUT_S = 600.0


async def all_parts(ctx: StageContext, ready: ElementsReady) -> list[dict] | None:
    """Every part's elements in page order, or None while some part is missing.

    Parts of one document share its key, hence one partition and one chunk agent,
    in order: the event of the last part to finish finds every part stored.
    """
    store = await ctx.resources.store()
    if ready.parts <= 1:
        return orjson.loads(await store.get_bytes(ready.elements_key, bucket=ready.bucket))
    keys = [elements_key(ready.project, ready.document_id, ready.version, p) for p in range(ready.parts)]
    present = set([k async for k in store.list_keys(
        work_prefix(ready.project, ready.document_id, ready.version), bucket=ready.bucket)])
    if not present.issuperset(keys):
        return None
    elements: list[dict] = []
    for key in keys:
        elements += orjson.loads(await store.get_bytes(key, bucket=ready.bucket))
    return elements


async def chunk_one(ctx: StageContext, ready: ElementsReady) -> None:
    """Chunk one document version's elements (all parts) and send its chunks, once."""
    ledger = (await ctx.resources.metadata()).ledger
    if await ledger.step_done(ready.document_id, ready.version, STAGE):
        return  # already chunked: a redelivery, or another range's event did it
    elements = await all_parts(ctx, ready)
    if elements is None:
        return  # more page ranges to come; the last one chunks the document
    await account_failed_parts(ctx, ready, elements)
    # a split document's page count: its PDF's (normalize), or the highest page of any
    # part (the event of one part counted only that part's pages)
    pages = max(ready.page_count, highest_page(elements))
    await ctx.emit(ready, DocumentStatus.CHUNKING, stage=STAGE, pages=pages)
    if not elements:
        raise EmptyDocument(f"no text in any of the {pages} pages"
                            if ready.parts > 1 else "no elements to chunk")
    store = await ctx.resources.store()
    profile = await load_profile(ready.category, ctx.settings.pg_dsn)
    params = ChunkParams(max_tokens=ctx.settings.embedder_max_tokens,
                         fit_to_embedder=profile.chunking == "fit")
    chunks = await ctx.resources.pool.run(chunk_elements, elements, params, timeout_s=CHUNK_TIMEOUT_S)
    if ctx.settings.vlm_base_url and profile.use_vlm:
        chunks = chunks + image_chunks(elements)
    if not chunks:
        raise EmptyDocument(f"{len(elements)} elements but no text to chunk")
    check_count(len(chunks), "max_chunks", "chunks")  # TooLarge: fails this document only
    total = len(chunks)
    records = [
        Chunk(chunk_id=chunk_id(ready.document_id, ready.version, i), document_id=ready.document_id,
              version=ready.version, index=i, total=total, project=ready.project,
              category=ready.category, filename=ready.filename, text=c["text"],
              page_number=c["page_number"], element_types=c["element_types"],
              table_html=c["table_html"], image_keys=c.get("image_keys", []),
              callback_url=ready.callback_url, bulk=ready.bulk)
        for i, c in enumerate(chunks)
    ]
    await store.put_bytes(
        processed_key(ready.project, ready.document_id, ready.version),
        orjson.dumps({"document_id": ready.document_id, "version": ready.version,
                      "filename": ready.filename, "pages": pages, "parts": ready.parts,
                      "chunks": [r.asdict() for r in records]}),
        "application/json", bucket=ready.bucket)
    partition = lane_partition(ready.document_id, total, await ctx.partition_count(ctx.topics.chunks),
                               ctx.settings.fair_small_document_chunks, bulk=ready.bulk)
    for record in records:
        await ctx.topics.chunks.send(key=ready.document_id, partition=partition, value=record)
    await ctx.delivered()  # the chunks are stored before the step's marker
    await ledger.mark_step(ready.document_id, ready.version, STAGE)


async def account_failed_parts(ctx: StageContext, ready: ElementsReady, elements: list[dict]) -> None:
    """Partial success at the join: a split document whose every part failed fails
    with its first part's code and every part's reason; parts the parser skipped
    (attachments, embedded parts: elements' ``metadata.skipped_parts``, each
    ``"name: reason"``) are recorded as failed parts with code ``skipped``
    (adapters/failed_parts.py), so the COMPLETED status lists them."""
    pool = (await ctx.resources.metadata()).pool
    failed = await failed_parts(pool, ready.document_id, ready.version) if ready.parts > 1 else []
    if ready.parts > 1 and len(failed) >= ready.parts:
        reasons = "; ".join(f"{f['part']}: {f['reason']}" for f in failed)
        raise error_with_code(failed[0]["code"], f"every part failed ({reasons})"[:2000])
    skipped: dict[str, str] = {}
    for el in elements:
        for entry in (el.get("metadata") or {}).get("skipped_parts") or []:
            name, _, reason = str(entry).partition(": ")
            skipped.setdefault(name, reason or "skipped by the parser")
    await record_failed_parts(pool, ready.document_id, ready.version,
                              [(name, "skipped", reason) for name, reason in skipped.items()])


def stage(ctx: StageContext) -> Stage:
    """chunk: one ElementsReady at a time."""
    return Stage(STAGE, ELEMENTS, chunk_one)
