"""A delete of versions up to N leaves versions above N whole (issue 23, failure 5).

normalize deleted ``work/`` and ``processed/`` by the whole-document prefix, so a
delete racing a new upload, a redelivered delete or a ``dlq redrive`` of an old one
removed v(N+1)'s objects.  Two levels:

- the stage function (agents.normalize.delete_one) over an in-memory bucket and
  Milvus stand-in: what it deletes, key by key (no stack);
- the session worker on the test stack: v1 and v2 of a text file COMPLETED, then
  the delete of v1 arrives (as a delete queued before v2's upload would) and is
  delivered a second time: v2's raw, work and processed objects, its chunks in
  Milvus, its projected status and its place in search all stay.
"""
from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from unittest import mock

import pytest

from adapters.object_keys import (document_prefix, elements_key, key_version, processed_key,
                                  raw_key, work_prefix)
from tests.conftest import ingest, run

DOC, PROJECT = "doc-1", "p1"


# ------------------------------------------------------------------ stage function
class _Bucket:
    """Just the S3 calls ObjectStore.delete_prefix and delete_one make, over a set."""

    def __init__(self, keys):
        self.keys = set(keys)

    def get_paginator(self, name):
        bucket = self

        class _Pages:
            async def _gen(self, Prefix):
                yield {"Contents": [{"Key": k} for k in sorted(bucket.keys) if k.startswith(Prefix)]}

            def paginate(self, Bucket, Prefix):
                return self._gen(Prefix)

        return _Pages()

    async def delete_objects(self, Bucket, Delete):
        for obj in Delete["Objects"]:
            self.keys.discard(obj["Key"])

    async def delete_object(self, Bucket, Key):
        self.keys.discard(Key)


class _Milvus:
    """Chunk rows as (document_id, version); the bounded delete the stage calls."""

    def __init__(self, rows):
        self.rows = list(rows)

    async def delete_versions_below(self, project, document_id, version):
        self.rows = [r for r in self.rows if not (r[0] == document_id and r[1] < version)]


def _objects(version: int) -> list[str]:
    return [raw_key(PROJECT, "default", version, DOC, "txt"),
            elements_key(PROJECT, DOC, version, 0),
            f"{work_prefix(PROJECT, DOC, version)}images/0000-0000.png",
            processed_key(PROJECT, DOC, version)]


def _delete(keys, rows, up_to: int):
    from adapters.object_store import ObjectStore
    from agents.normalize import delete_one
    from schemas import DELETE, UploadEvent

    bucket = _Bucket(keys)
    store = ObjectStore.__new__(ObjectStore)
    store.bucket, store.client = "b", bucket
    vectors = _Milvus(rows)
    emitted = []

    async def metadata():
        async def versions(document_id):
            return [{"version": v, "raw_key": raw_key(PROJECT, "default", v, DOC, "txt")} for v in (1, 2)]
        return SimpleNamespace(versions=versions, pool=None)

    async def get_store():
        return store

    async def emit(ref, status, **kw):
        emitted.append((ref.version, status.value))

    async def document_keys():
        return None

    erased = []

    async def erase_document(**kw):  # its own bounds (versions <= N) are tests/test_erasure.py's
        erased.append(kw["up_to_version"])

    ctx = SimpleNamespace(resources=SimpleNamespace(vectors=vectors, metadata=metadata, store=get_store),
                          emit=emit, document_keys=document_keys)
    event = UploadEvent(document_id=DOC, version=up_to, action=DELETE, project=PROJECT,
                        category="default", filename="a.txt", bucket="b",
                        key=raw_key(PROJECT, "default", up_to, DOC, "txt"), sha256="", size=0)
    with mock.patch("agents.normalize.erase_document", erase_document):
        asyncio.run(delete_one(ctx, event))
    assert erased == [up_to]
    return bucket.keys, vectors.rows, emitted


def test_delete_of_v1_leaves_v2_objects_and_chunks():
    keys, rows, emitted = _delete(_objects(1) + _objects(2), [(DOC, 1), (DOC, 2), (DOC, 2)], up_to=1)
    assert keys == set(_objects(2))
    assert rows == [(DOC, 2), (DOC, 2)]
    assert emitted == [(1, "DELETED")]


def test_redelivered_delete_of_v1_still_leaves_v2():
    keys, rows, _ = _delete(_objects(1) + _objects(2), [(DOC, 2)], up_to=1)
    keys, rows, _ = _delete(keys, rows, up_to=1)
    assert keys == set(_objects(2)) and rows == [(DOC, 2)]


def test_delete_of_the_latest_version_removes_every_version():
    keys, rows, _ = _delete(_objects(1) + _objects(2), [(DOC, 2)], up_to=2)
    assert keys == set() and rows == []


def test_key_version_reads_work_and_processed_keys_only():
    work, processed = document_prefix("work", PROJECT, DOC), document_prefix("processed", PROJECT, DOC)
    assert key_version(elements_key(PROJECT, DOC, 12, 3), work) == 12
    assert key_version(processed_key(PROJECT, DOC, 7), processed) == 7
    assert key_version(f"{processed}v7.json.bak", processed) is None
    assert key_version(f"{work}v12", work) is None  # no object of a version has this key
    assert key_version(f"{work}notes/v1/x", work) is None
    assert key_version(processed_key(PROJECT, "doc-10", 1), processed) is None


# ---------------------------------------------------------------- session worker
async def _keys(settings, document_id, project) -> set[str]:
    from adapters.object_store import ObjectStore

    async with ObjectStore(settings) as store:
        out = set()
        for prefix in (document_prefix("work", project, document_id),
                       document_prefix("processed", project, document_id), f"raw/{project}/"):
            out |= {k async for k in store.list_keys(prefix) if document_id in k}
        return out


async def _deleted_events(settings, document_id) -> int:
    from streams.kafka_io import status_history

    return sum(1 for e in await status_history(settings.kafka_bootstrap)
               if e.document_id == document_id and e.status == "DELETED")


async def _wait_deleted_events(settings, document_id, n: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while await _deleted_events(settings, document_id) < n:
        assert time.monotonic() < deadline, f"no DELETED event #{n} within {timeout_s:.0f} s"
        await asyncio.sleep(1.0)


@pytest.mark.integration
def test_old_delete_after_a_new_version_leaves_the_new_version(stack, worker, tmp_path, project):
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from streams.ingest import queue_delete
    from streams.kafka_io import producer, send_record
    from topics import UPLOADS

    doc = tmp_path / "plant.txt"
    doc.write_text("The Riverside plant used 318285 kWh in the first quarter.\n")
    first = ingest([doc], project).results[0]
    doc.write_text("The Riverside plant used 411002 kWh in the second quarter.\n")
    second = ingest([doc], project).results[0]
    document_id = first.document_id
    assert (first.version, second.version) == (1, 2)
    before = run(_keys(stack, document_id, project))
    v2_keys = {k for k in before if "/v2" in k}
    assert processed_key(project, document_id, 2) in v2_keys and second.raw_key in v2_keys
    assert any(k.startswith(work_prefix(project, document_id, 2)) for k in v2_keys)
    vectors = VectorStore(stack.milvus_uri)
    v2_chunks = vectors.count_sync(project, document_id, 2)
    assert v2_chunks > 0

    async def deliver_delete_of_v1(times: int):
        async with Metadata(stack.pg_dsn) as md, producer(stack.kafka_bootstrap) as prod:
            event = await queue_delete(document_id=document_id, version=1, project=project,
                                       category="default", filename=doc.name, bucket=stack.bucket,
                                       key=first.raw_key, sha256="", size=0, producer=prod, metadata=md)
            await _wait_deleted_events(stack, document_id, 1)
            for n in range(2, times + 1):  # the same record again (a redelivery, a redrive)
                await send_record(prod, UPLOADS, document_id, event)
                await _wait_deleted_events(stack, document_id, n)
            return await md.get_document(document_id), await md.ledger.current_versions([document_id])

    row, current = run(deliver_delete_of_v1(times=2))
    after = run(_keys(stack, document_id, project))
    assert after == v2_keys, f"lost: {sorted(v2_keys - after)}; kept of v1: {sorted(after - v2_keys)}"
    assert vectors.count_sync(project, document_id, 2) == v2_chunks
    assert vectors.count_sync(project, document_id, 1) == 0
    assert (row["status"], row["version"]) == ("COMPLETED", 2)
    assert current == {document_id: 2}
