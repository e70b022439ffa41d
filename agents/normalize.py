"""normalize stage: ``uploads`` → ``partition-tasks`` (whole documents) or ``page-ranges``
(page ranges, and whole documents of a project's burst).

Detects the real type by content, converts when the category profile asks, and
hands partition a claim check (bucket/key) to the file to parse.  Delete requests
are applied here: chunks and objects of every version up to the delete's leave
Milvus and storage, status DELETED.  Its worker also sweeps the upload outbox: versions registered but
never queued (the uploader lost the broker half-way) are queued from here.
"""
from __future__ import annotations

import logging
import tempfile
import time
import zlib
from pathlib import Path

import faust

from adapters.erasure import erase_document
from adapters.object_keys import document_prefix, key_version, normalized_key
from adapters.profiles_store import load_profile
from agents.context import StageContext
from agents.runner import Stage
from schemas import DELETE, UPLOAD, DocumentStatus, PartitionTask, UploadEvent, status_event
from stages.filenames import safe_filename
from stages.normalize import normalize_file
from topics import UPLOADS
from topics.lanes import half_partition

STAGE = "normalize"
log = logging.getLogger(__name__)


async def normalize_one(ctx: StageContext, event: UploadEvent) -> None:
    """Normalize one upload and send its PartitionTask(s); apply a delete request.

    A PDF longer than the profile's ``max_pages_per_task`` becomes one task per page
    range (``part``/``parts``), and a longer document of another format one task per
    range of units of that much text (``stages.document_parts``), sent to
    ``page-ranges`` and spread over its partitions (the count read from the broker's
    metadata), so several partition workers share it; so is a document in one piece of
    a project's burst (``event.bulk``: the bulk lane, topics/lanes.py); another goes to
    ``partition-tasks`` (its project lane's half: :func:`whole_partition`).
    """
    if event.action == DELETE:
        await delete_one(ctx, event)
        return
    await ctx.emit(event, DocumentStatus.NORMALIZING, stage=STAGE)
    store = await ctx.resources.store()
    profile = await load_profile(event.category, ctx.settings.pg_dsn)
    with tempfile.TemporaryDirectory(prefix="ragstream-normalize-") as tmp:
        src = await store.download(event.key, Path(tmp) / safe_filename(event.filename),
                                   bucket=event.bucket)
        result = await ctx.resources.pool.run(normalize_file, src, Path(tmp) / "out", profile,
                                              timeout_s=ctx.settings.convert_timeout_s + 30)
        key = event.key
        if Path(result.path) != src:  # converted to PDF, or a repaired PDF
            key = normalized_key(event.project, event.document_id, event.version, result.filetype)
            await store.put_file(key, result.path, bucket=event.bucket)
    if result.reason:  # e.g. "DOCX converted to PDF", "split into 28 parts of ..."
        log.info("normalize: %s v%s: %s", event.document_id, event.version, result.reason)
    ranges = result.page_ranges if len(result.page_ranges) > 1 else [(0, 0)]
    # page ranges have a topic of their own (a lane apart from whole documents) and go
    # round-robin over its partitions, so every partition worker gets some; so does a
    # whole document of a project's burst (the partition stage's bulk lane: its parse
    # slots are the ranges'); another whole document's task goes to its lane's half of
    # partition-tasks (or follows its key, project lanes off)
    bulk = event.bulk and ctx.settings.project_lanes
    spread = (len(ranges) > 1 or bulk) and ctx.settings.page_range_lane
    topic = ctx.topics.page_ranges if spread else ctx.topics.partition_tasks
    round_robin = spread or len(ranges) > 1
    partitions = await ctx.partition_count(topic) if round_robin else 1
    for part, (start, end) in enumerate(ranges):
        partition = task_partition(event.document_id, part, partitions) if round_robin \
            else await whole_partition(ctx, event)
        await topic.send(key=event.document_id, partition=partition, value=PartitionTask(
            document_id=event.document_id, version=event.version, project=event.project,
            category=event.category, filename=event.filename, bucket=event.bucket,
            callback_url=event.callback_url, key=key, filetype=result.filetype,
            page_count=result.page_count or 0, page_start=start, page_end=end,
            part=part, parts=len(ranges), bulk=event.bulk))


async def whole_partition(ctx: StageContext, event: UploadEvent):
    """The ``partition-tasks`` partition of a document in one piece: its project lane's
    half (topics/lanes.py, ``event.bulk``) when project lanes are on, else None (the
    key picks)."""
    if not ctx.settings.project_lanes:
        return None
    return half_partition(event.document_id, event.bulk,
                          await ctx.partition_count(ctx.topics.partition_tasks))


def task_partition(document_id: str, part: int, partitions: int) -> int:
    """The ``page-ranges`` partition of page range ``part`` (0-based) of a split
    document: round-robin over the ``partitions`` partitions, starting from one that
    the document id picks (CRC-32, the same on every worker and every redelivery), so
    that split documents do not all start on partition 0 and pile their first ranges
    on one consumer."""
    return (zlib.crc32(document_id.encode()) + part) % partitions


async def delete_one(ctx: StageContext, event: UploadEvent) -> None:
    """Remove a document up to the delete's version N (``event.version``): its chunks
    of versions <= N from Milvus, the raw objects of those versions (whatever their
    category), their processed and work objects; then erase the rest
    (adapters/erasure.py: rows in every physical collection, embedding-cache rows, file
    names, and the data keys that open its sealed records); then status DELETED for
    version N (its file name blank).

    Versions above N are left whole: a delete racing a new upload, a redelivered
    delete or a ``dlq redrive`` of an old one must not remove v(N+1)'s objects or
    chunks (issue 23, failure 5; tests/test_delete_bounds.py).  N's status event
    cannot move a newer version's projection back (its ``seq`` is lower).
    Idempotent."""
    up_to = event.version
    await ctx.resources.vectors.delete_versions_below(event.project, event.document_id, up_to + 1)
    metadata = await ctx.resources.metadata()
    store = await ctx.resources.store()
    for row in await metadata.versions(event.document_id):
        if row["version"] <= up_to:
            await store.client.delete_object(Bucket=event.bucket, Key=row["raw_key"])
    for area in ("processed", "work"):
        prefix = document_prefix(area, event.project, event.document_id)
        await store.delete_prefix(prefix, event.bucket, where=_versions_up_to(prefix, up_to))
    # every physical collection, the embedding cache, file names, then the data keys
    await erase_document(store=ctx.resources.vectors, pool=metadata.pool,
                         keys=await ctx.document_keys(), project=event.project,
                         document_id=event.document_id, up_to_version=event.version)
    await ctx.emit(event, DocumentStatus.DELETED, stage=STAGE)


def _versions_up_to(prefix: str, up_to: int):
    """Key filter: objects of versions ``<= up_to`` under a document prefix (a key
    without a version in it is kept)."""
    def wanted(key: str) -> bool:
        version = key_version(key, prefix)
        return version is not None and version <= up_to
    return wanted


async def sweep_unqueued(ctx: StageContext) -> int:
    """Queue versions whose uploader registered them but never sent their events
    (older than ``upload_sweep_after_s``) when their raw object is stored; returns
    how many were sent."""
    metadata = await ctx.resources.metadata()
    store = await ctx.resources.store()
    sent = 0
    for row in await metadata.unqueued_versions(ctx.settings.upload_sweep_after_s):
        if not await store.exists(row["raw_key"]):
            continue  # the upload itself never finished: nothing to process
        event = UploadEvent(
            document_id=row["document_id"], version=row["version"], action=UPLOAD,
            project=row["project"], category=row["category"], filename=row["filename"],
            bucket=store.bucket, key=row["raw_key"], sha256=row["sha256"], size=row["size"],
            content_type=row.get("content_type") or "application/octet-stream",
            callback_url=row.get("callback_url"), submitted_at=time.time())
        await ctx.topics.status.send(key=event.document_id, value=status_event(
            event.document_id, event.version, DocumentStatus.QUEUED, stage="upload",
            project=event.project, filename=event.filename, callback_url=event.callback_url))
        await ctx.topics.uploads.send(key=event.document_id, value=event)
        await ctx.delivered()  # both records are stored before the outbox marker
        await metadata.mark_queued(event.document_id, event.version)
        log.warning("normalize: queued %s v%s, which its uploader registered but never sent",
                    event.document_id, event.version)
        sent += 1
    return sent


def stage(ctx: StageContext) -> Stage:
    """normalize: every upload and delete request; delete requests always run (their
    own tombstone would make the guard skip them; delete_one is idempotent)."""
    return Stage(STAGE, UPLOADS, normalize_one, unguarded=lambda e: e.action == DELETE,
                 step=lambda e: STAGE)


def extras(app: faust.App, ctx: StageContext) -> None:
    """The upload-outbox sweep, on the group leader only."""

    @app.timer(interval=ctx.settings.upload_sweep_interval_s, on_leader=True)
    async def sweep_uploads() -> None:
        try:
            await sweep_unqueued(ctx)
        except Exception:  # noqa: BLE001 — next tick retries
            log.exception("normalize: upload sweep failed")
