"""partition agent: ``partition-tasks`` → ``elements``.

Parses the normalized file into unstructured elements in the process pool and
stores them as JSON in object storage (claim check); the event carries the key.
"""
from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import faust
import orjson

from adapters.object_keys import elements_key
from agents.context import StageContext
from agents.failures import run_guarded
from schemas import DocumentStatus, ElementsReady, PartitionTask
from stages.partition import partition_file
from adapters.profiles_store import load_profile
from topics import PARTITION_TASKS

STAGE = "partition"
WORKER = f"{socket.gethostname()}:{os.getpid()}"


def _page_count(elements: list[dict]) -> int:
    return max((e.get("metadata", {}).get("page_number") or 0 for e in elements), default=0)


async def partition_one(ctx: StageContext, task: PartitionTask) -> None:
    """Partition one task (a whole file or one page range) and send ElementsReady."""
    if task.part == 0:  # one PARTITIONING per version, however many page ranges
        await ctx.emit(task, DocumentStatus.PARTITIONING, stage=STAGE, pages=task.page_count)
    store = await ctx.resources.store()
    profile = await load_profile(task.category, ctx.settings.pg_dsn)
    pages = (task.page_start, task.page_end) if task.page_end else None
    with tempfile.TemporaryDirectory(prefix="ragstream-partition-") as tmp:
        path = await store.download(task.key, Path(tmp) / f"input.{task.filetype}", bucket=task.bucket)
        elements = await ctx.resources.pool.run(
            partition_file, path, task.filetype, profile, pages, task.filename,
            timeout_s=ctx.settings.partition_timeout_s)
    key = elements_key(task.project, task.document_id, task.version, task.part)
    await store.put_bytes(key, orjson.dumps(elements), "application/json", bucket=task.bucket)
    await ctx.topics.elements.send(key=task.document_id, value=ElementsReady(
        document_id=task.document_id, version=task.version, project=task.project,
        category=task.category, filename=task.filename, bucket=task.bucket,
        callback_url=task.callback_url, elements_key=key, element_count=len(elements),
        page_count=task.page_count or _page_count(elements), part=task.part, parts=task.parts,
        worker=WORKER))


def register(app: faust.App, ctx: StageContext) -> None:
    """Declare the partition agent on ``app``."""

    @app.agent(ctx.topics.partition_tasks, name="partition")
    async def partition(stream: faust.StreamT[PartitionTask]) -> None:
        async for task in stream:
            await run_guarded(ctx.topics, stage=STAGE, source_topic=PARTITION_TASKS.name,
                              event=task, work=lambda t=task: partition_one(ctx, t))
