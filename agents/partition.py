"""partition stage: ``partition-tasks`` (whole documents) and ``page-ranges`` (parts of
split ones, an agent of their own) → ``elements``.

Parses the normalized file (or one page range of it) into unstructured elements in
the process pool and stores them as JSON in object storage (claim check); the event
carries the key.  A page range with no text (blank pages) stores zero elements: only
a document whose ranges are ALL empty fails, at the chunk stage (issue 8, failure 10).
Image payloads (``metadata.image_base64``: PDF image crops) are moved out of the
elements into objects of their own (``adapters.object_keys.image_key``), each
element keeping an ``s3://bucket/key`` reference in ``metadata.image_key``
(:func:`store_images`), for image chunks and the enhance stage's model.

Partial success: when one part of a split document fails for good (after its
retries) and the profile has ``allow_partial`` (the default), :func:`salvage_part`
records it (adapters/failed_parts.py) and stores zero elements for it, so the join
in the chunk stage goes on with the other parts; the document ends COMPLETED with
``partial: true`` and the part listed.  Off, or for a document in one piece, the
failure fails the version as before.
"""
from __future__ import annotations

import base64
import binascii
import os
import socket
import tempfile
from pathlib import Path

import orjson

from adapters.failed_parts import record_failed_parts
from adapters.object_keys import elements_key, image_key, object_uri
from adapters.object_store import ObjectStore
from adapters.profiles_store import load_profile
from agents.context import StageContext
from agents.runner import Stage, declare
from schemas import DocumentStatus, ElementsReady, PartitionTask
from stages.chunk import highest_page
from stages.errors import EmptyDocument
from stages.partition import partition_file
from topics import PAGE_RANGES, PARTITION_TASKS
from topics.lanes import half_partition

STAGE = "partition"
WORKER = f"{socket.gethostname()}:{os.getpid()}"


_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp",
        "image/tiff": "tiff", "image/bmp": "bmp"}


async def store_images(store: ObjectStore, task: PartitionTask, elements: list[dict]) -> int:
    """Move every element's ``metadata.image_base64`` payload to its own object in
    ``task.bucket`` (``image_key(..., task.part, n)``, n counting from 0 in element
    order, so a redelivery overwrites) and replace it with ``metadata.image_key`` =
    ``s3://bucket/key``; an undecodable payload is dropped.  Returns how many images
    were stored.  Mutates ``elements``."""
    n = 0
    for el in elements:
        meta = el.get("metadata") or {}
        payload = meta.pop("image_base64", None)
        if not payload:
            continue
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            continue
        mime = meta.get("image_mime_type") or "image/png"
        key = image_key(task.project, task.document_id, task.version, task.part, n,
                        _EXT.get(mime, "bin"))
        await store.put_bytes(key, data, mime, bucket=task.bucket)
        meta["image_key"] = object_uri(task.bucket, key)
        n += 1
    return n


def in_bulk_lane(task: PartitionTask) -> bool:
    """A task of bulk-lane work: its document came in a project's burst, or it is one
    part of a split document.  Such a task is parsed in the niced pool and its
    elements travel in the bulk half of ``elements``."""
    return task.bulk or task.parts > 1


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
            elements = await ctx.resources.pool_for(in_bulk_lane(task)).run(
                partition_file, path, task.filetype, profile, pages, task.filename,
                timeout_s=ctx.settings.partition_timeout_s)
        except EmptyDocument:
            if task.parts <= 1:
                raise
            elements = []  # blank pages in this range; the join decides for the document
    await store_images(store, task, elements)
    await send_elements(ctx, task, elements)


def part_name(task: PartitionTask) -> str:
    """How a part is named in the status: ``pages 33-64`` for a PDF's page range,
    ``part 3 of 9`` for another document's unit range (DOCX blocks, slides, …)."""
    if task.filetype == "pdf" and task.page_end:
        return f"pages {task.page_start}-{task.page_end}"
    return f"part {task.part + 1} of {task.parts}"


async def salvage_part(ctx: StageContext, task: PartitionTask, failure) -> bool:
    """The runner's ``salvage`` hook: keep a failed part of a split document as a
    failed part (recorded, zero elements stored and announced) when the profile
    allows partial documents; False (fail the version) for a document in one piece
    or a profile with ``allow_partial`` off.  ``failure``: the
    ``stages.errors.DocumentError`` the task failed with."""
    if task.parts <= 1 or not (await load_profile(task.category, ctx.settings.pg_dsn)).allow_partial:
        return False
    pool = (await ctx.resources.metadata()).pool
    await record_failed_parts(pool, task.document_id, task.version, [(part_name(task), failure.code, failure.reason)])
    await send_elements(ctx, task, [])
    return True


async def send_elements(ctx: StageContext, task: PartitionTask, elements: list[dict]) -> None:
    """Store a task's elements (JSON, claim check) and send its ElementsReady."""
    store = await ctx.resources.store()
    key = elements_key(task.project, task.document_id, task.version, task.part)
    await store.put_bytes(key, orjson.dumps(elements), "application/json", bucket=task.bucket)
    # every part of a document on one partition (the chunk stage joins them there), in
    # the bulk lane when the document came in a project's burst or is split
    partition = half_partition(task.document_id, in_bulk_lane(task),
                               await ctx.partition_count(ctx.topics.elements)) \
        if ctx.settings.project_lanes else None
    await ctx.topics.elements.send(key=task.document_id, partition=partition, value=ElementsReady(
        document_id=task.document_id, version=task.version, project=task.project,
        category=task.category, filename=task.filename, bucket=task.bucket,
        callback_url=task.callback_url, elements_key=key, element_count=len(elements),
        page_count=task.page_count or highest_page(elements), part=task.part, parts=task.parts,
        worker=WORKER, bulk=in_bulk_lane(task)))


def pool_workers(settings) -> int:
    """Parse processes of a partition worker: one per task it works on at once
    (``partition_concurrency`` whole documents + ``partition_range_concurrency`` page
    ranges), at least ``stage_workers``."""
    return max(settings.stage_workers,
               settings.partition_concurrency + settings.partition_range_concurrency)


def bulk_pool_workers(settings) -> int:
    """Of :func:`pool_workers`, the processes that parse bulk-lane tasks (page ranges of
    split documents, a project's burst) at ``bulk_parse_nice`` lower CPU priority: the
    ``partition_range_concurrency`` range slots; 0 (one pool for all) when
    ``bulk_parse_nice`` is 0."""
    return settings.partition_range_concurrency if settings.bulk_parse_nice > 0 else 0


def _step(task: PartitionTask) -> str:
    return f"{STAGE}:{task.part}"


def stage(ctx: StageContext) -> Stage:
    """partition, whole documents (``partition-tasks``): ``partition_concurrency`` at
    a time, each parsed in its own pool process."""
    return Stage(STAGE, PARTITION_TASKS, partition_one, step=_step,
                 concurrency=ctx.settings.partition_concurrency, salvage=salvage_part)


def ranges_stage(ctx: StageContext) -> Stage:
    """partition, page ranges of split documents (``page-ranges``): a second agent of
    the same consumer group with ``partition_range_concurrency`` slots of its own, so a
    small document never waits for a slot behind a long PDF's or scan's ranges."""
    return Stage(STAGE, PAGE_RANGES, partition_one, step=_step, lane="ranges",
                 concurrency=ctx.settings.partition_range_concurrency, salvage=salvage_part)


def extras(app, ctx: StageContext) -> None:
    """Declare the page-range agent beside the whole-document one."""
    declare(app, ctx, ranges_stage(ctx))


#: parse processes fork from a server that has loaded the parsers (stages/preload_parsers.py)
pool_preload = True
