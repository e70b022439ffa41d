"""partition stage: ``partition-tasks`` → ``elements``.

Parses the normalized file (or one page range of it) into unstructured elements in
the process pool and stores them as JSON in object storage (claim check); the event
carries the key.  A page range with no text (blank pages) stores zero elements: only
a document whose ranges are ALL empty fails, at the chunk stage (issue 8, failure 10).
"""
from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import orjson

from adapters.object_keys import elements_key
from adapters.profiles_store import load_profile
from agents.context import StageContext
from agents.runner import Stage
from schemas import DocumentStatus, ElementsReady, PartitionTask
from stages.errors import EmptyDocument
from stages.partition import partition_file
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
        try:
            elements = await ctx.resources.pool.run(
                partition_file, path, task.filetype, profile, pages, task.filename,
                timeout_s=ctx.settings.partition_timeout_s)
        except EmptyDocument:
            if task.parts <= 1:
                raise
            elements = []  # blank pages in this range; the join decides for the document
    key = elements_key(task.project, task.document_id, task.version, task.part)
    await store.put_bytes(key, orjson.dumps(elements), "application/json", bucket=task.bucket)
    await ctx.topics.elements.send(key=task.document_id, value=ElementsReady(
        document_id=task.document_id, version=task.version, project=task.project,
        category=task.category, filename=task.filename, bucket=task.bucket,
        callback_url=task.callback_url, elements_key=key, element_count=len(elements),
        page_count=task.page_count or _page_count(elements), part=task.part, parts=task.parts,
        worker=WORKER))


def stage(ctx: StageContext) -> Stage:
    """partition: one task at a time (the parse runs in the process pool)."""
    return Stage(STAGE, PARTITION_TASKS, partition_one, step=lambda t: f"{STAGE}:{t.part}")
