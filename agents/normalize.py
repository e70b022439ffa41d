"""normalize agent: ``uploads`` → ``partition-tasks``.

Detects the real type by content, converts when the category profile asks, and
hands partition a claim check (bucket/key) to the file to parse.  Delete requests
are applied here: chunks leave Milvus, objects leave storage, status DELETED.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import faust

from adapters.object_keys import document_prefix, normalized_key
from agents.context import StageContext
from agents.failures import run_guarded
from schemas import DELETE, DocumentStatus, PartitionTask, UploadEvent
from stages.normalize import normalize_file
from adapters.profiles_store import load_profile
from topics import UPLOADS

STAGE = "normalize"


async def normalize_one(ctx: StageContext, event: UploadEvent) -> None:
    """Normalize one upload and send its PartitionTask(s).

    A PDF longer than the profile's ``max_pages_per_task`` becomes one task per page
    range (``part``/``parts``), so several partition workers share one document and
    each holds only its range in memory.
    """
    await ctx.emit(event, DocumentStatus.NORMALIZING, stage=STAGE)
    store = await ctx.resources.store()
    profile = await load_profile(event.category, ctx.settings.pg_dsn)
    with tempfile.TemporaryDirectory(prefix="ragstream-normalize-") as tmp:
        src = await store.download(event.key, Path(tmp) / Path(event.filename).name,
                                   bucket=event.bucket)
        result = await ctx.resources.pool.run(normalize_file, src, Path(tmp) / "out", profile,
                                              timeout_s=ctx.settings.convert_timeout_s + 30)
        key = event.key
        if Path(result.path) != src:  # converted to PDF, or a repaired PDF
            key = normalized_key(event.project, event.document_id, event.version, result.filetype)
            await store.put_file(key, result.path, bucket=event.bucket)
    ranges = result.page_ranges if len(result.page_ranges) > 1 else [(0, 0)]
    for part, (start, end) in enumerate(ranges):
        # page ranges go round-robin over the topic's partitions, so every partition
        # worker gets some; a single task follows its key (the document id)
        partition = part % ctx.settings.topic_partitions if len(ranges) > 1 else None
        await ctx.topics.partition_tasks.send(key=event.document_id, partition=partition, value=PartitionTask(
            document_id=event.document_id, version=event.version, project=event.project,
            category=event.category, filename=event.filename, bucket=event.bucket,
            callback_url=event.callback_url, key=key, filetype=result.filetype,
            page_count=result.page_count or 0, page_start=start, page_end=end,
            part=part, parts=len(ranges)))


async def delete_one(ctx: StageContext, event: UploadEvent) -> None:
    """Remove a document: its chunks from Milvus, its objects, then status DELETED."""
    await ctx.resources.vectors.delete_document(event.project, event.document_id)
    store = await ctx.resources.store()
    raw = [k async for k in store.list_keys(f"raw/{event.project}/{event.category}/", event.bucket)
           if Path(k).stem == event.document_id]
    for key in raw:
        await store.client.delete_object(Bucket=event.bucket, Key=key)
    await store.delete_prefix(document_prefix("processed", event.project, event.document_id), event.bucket)
    await store.delete_prefix(document_prefix("work", event.project, event.document_id), event.bucket)
    await ctx.emit(event, DocumentStatus.DELETED, stage=STAGE)


def register(app: faust.App, ctx: StageContext) -> None:
    """Declare the normalize agent on ``app``."""

    @app.agent(ctx.topics.uploads, name="normalize")
    async def normalize(stream: faust.StreamT[UploadEvent]) -> None:
        async for event in stream:
            work = (lambda e=event: delete_one(ctx, e)) if event.action == DELETE \
                else (lambda e=event: normalize_one(ctx, e))
            await run_guarded(ctx.topics, stage=STAGE, source_topic=UPLOADS.name,
                              event=event, work=work)
