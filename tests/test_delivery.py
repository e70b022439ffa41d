"""The delivery promises under faults (issue 8): each test is one numbered failure.

All run against the real test stack (broker, S3, PostgreSQL, Milvus, Triton) and the
session worker (one process per stage).  Faults are real: a broker that goes away,
PostgreSQL stopped, records replayed, poison bytes produced.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from adapters.vector_store import alias_name
from tests.conftest import free_port_block, ingest, run

pytestmark = [pytest.mark.integration]


# ----------------------------------------------------------------------------- helpers
async def register_raw(settings, project: str, path: Path, document_id: str, after=None):
    """Register ``path`` as a new version of ``document_id`` (category ``default``,
    extension ``txt``) and store its raw object, as an upload does before its outbox
    sends it.  ``after(metadata, alloc)``, if given, runs on the same connection.
    Returns the ledger's allocation (``created``, ``queued``, ``version``, ``raw_key``)."""
    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head
    from adapters.object_keys import raw_key
    from adapters.object_store import ObjectStore, sha256_file

    await upgrade_head(settings.pg_dsn)
    async with ObjectStore(settings) as store, Metadata(settings.pg_dsn) as md:
        alloc = await md.register_version(
            document_id=document_id, project=project, category="default", filename=path.name,
            sha256=sha256_file(path), size=path.stat().st_size,
            raw_key_for=lambda v: raw_key(project, "default", v, document_id, "txt"))
        await store.put_file(alloc.raw_key, path, "text/plain")
        if after is not None:
            await after(md, alloc)
        return alloc


def _text_files(folder: Path, n: int, tag: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = folder / f"{tag}-{i}.txt"
        p.write_text(f"Report {tag} number {i}.\n\nThe {tag} pumping station {i} used "
                     f"{1000 + i} kWh in March.\n")
        out.append(p)
    return out


def _pdf_with_blank_pages(path: Path, pages: int, blank: range) -> Path:
    """A born-digital PDF of ``pages`` pages, those in ``blank`` (1-based) empty."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4, invariant=1)
    for n in range(1, pages + 1):
        if n not in blank:
            c.setFont("Helvetica", 12)
            c.drawString(72, 760, f"Section {n}: treatment plant log")
            c.drawString(72, 740, f"On page {n} the plant treated {n * 10} megalitres.")
        c.showPage()
    c.save()
    return path


async def _statuses(settings, project: str) -> list:
    from streams.kafka_io import status_history

    return [ev for ev in await status_history(settings.kafka_bootstrap) if ev.project == project]


async def _wait_until(predicate, timeout_s: float, what: str, every_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


async def _projected(settings, document_id: str) -> dict | None:
    from adapters.metadata import Metadata

    async with Metadata(settings.pg_dsn) as md:
        return await md.get_document(document_id)


# ------------------------------------------------------------------- 1: upload outbox
def test_upload_retry_after_broker_loss_queues_the_version(stack, worker, tmp_path, project):
    """The first ingest registers the version, then its broker goes away before the
    events are sent: the retry must queue that version (not answer "unchanged")."""
    from aiokafka import AIOKafkaProducer

    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head
    from adapters.object_store import ObjectStore
    import devstack
    from streams import broker_quirks
    from streams.ingest import ingest_file
    from streams.kafka_io import producer

    doc = _text_files(tmp_path, 1, "outbox")[0]
    port = free_port_block(1)
    lost = stack.model_copy(update={"data_dir": tmp_path / "lost-broker",
                                    "kafka_bootstrap": f"127.0.0.1:{port}",
                                    "broker_storage": "memory://tansu/"})
    devstack.up(lost, names=["broker"], timeout_s=60)

    async def scenario():
        await upgrade_head(stack.pg_dsn)
        async with ObjectStore(stack) as store, Metadata(stack.pg_dsn) as md:
            prod = AIOKafkaProducer(bootstrap_servers=lost.kafka_bootstrap, request_timeout_ms=3000,
                                    **broker_quirks.producer_kwargs())
            await prod.start()
            devstack.down(lost, names=["broker"])  # the broker blips away
            try:
                with pytest.raises(Exception):
                    await ingest_file(doc, project=project, category="default", store=store,
                                      metadata=md, producer=prod)
            finally:
                await prod.stop()
            async with producer(stack.kafka_bootstrap) as real:
                return await ingest_file(doc, project=project, category="default", store=store,
                                         metadata=md, producer=real)

    try:
        retry = run(scenario())
    finally:
        devstack.down(lost, names=["broker"])
    assert retry.queued and retry.version == 1, retry
    run(_wait_until(lambda: _terminal(stack, retry.document_id), 300, "the retried version"))
    row = run(_projected(stack, retry.document_id))
    assert row["status"] == "COMPLETED" and row["version"] == 1


async def _terminal(settings, document_id):
    row = await _projected(settings, document_id)
    return row if row and row["status"] in ("COMPLETED", "FAILED", "DELETED") else None


def test_upload_outbox_sweep_queues_an_abandoned_version(stack, worker, tmp_path, project):
    """A version registered (raw object stored) whose uploader died before sending
    anything is queued by the normalize worker's sweep, without any retry."""
    from streams.document_ids import default_document_id, scoped_id

    doc = _text_files(tmp_path, 1, "abandoned")[0]
    document_id = scoped_id(project, default_document_id(doc.name))
    alloc = run(register_raw(stack, project, doc, document_id))
    assert alloc.created and not alloc.queued
    # the session worker sweeps every few seconds for versions older than
    # RAGSTREAM_UPLOAD_SWEEP_AFTER_S (conftest: 10 s)
    row = run(_wait_until(lambda: _terminal(stack, document_id), 240, "the swept version"))
    assert row["status"] == "COMPLETED" and row["version"] == 1


# ------------------------------------------------- 3: only the current version is searchable
def test_replayed_old_version_is_skipped_and_search_shows_only_current(stack, worker, tmp_path, project):
    """After v2 completes, v1's upload and chunk events replayed (as a restarted
    worker or a new consumer group would) index nothing; search returns v2 only, and
    never chunks of a version still running."""
    from adapters.vector_store import VectorStore
    from streams.kafka_io import producer, read_topic, send_raw
    from search.query import search
    from topics import CHUNKS, UPLOADS

    doc = tmp_path / "plant.txt"
    doc.write_text("The Riverside plant used 318285 kWh in the first quarter.\n")
    first = ingest([doc], project)
    doc.write_text("The Riverside plant used 411002 kWh in the second quarter.\n")
    second = ingest([doc], project)
    document_id = first.results[0].document_id
    assert [r.version for r in first.results + second.results] == [1, 2]
    assert second.last[document_id].status == "COMPLETED"

    async def replay_v1():
        sent = 0
        async with producer(stack.kafka_bootstrap) as prod:
            for spec in (UPLOADS, CHUNKS):
                async for rec in read_topic(stack.kafka_bootstrap, spec.name):
                    body = orjson.loads(rec.value)
                    if body.get("document_id") == document_id and body.get("version") == 1:
                        await send_raw(prod, spec.name, rec.key, rec.value)
                        sent += 1
        return sent

    assert run(replay_v1()) >= 2
    time.sleep(8)  # let every stage see the replayed events
    vectors = VectorStore(stack.milvus_uri)
    ids = vectors.chunk_ids_sync(project, document_id)
    assert ids and all(i.startswith(f"{document_id}:2:") for i in ids), ids
    # a version still running: its chunks are in Milvus but must not be returned
    running = [{**row, "chunk_id": f"{document_id}:3:0", "version": 3,
                "text": "The Riverside plant used 999999 kWh (draft)."}
               for row in vectors.client.query(alias_name(project), filter=f'document_id == "{document_id}"',
                                               output_fields=["*"], limit=1)]
    vectors.upsert_sync(project, running)
    result = run(search("Riverside plant kWh quarter", project=project, k=5, settings=stack))
    assert result.hits and {h["version"] for h in result.hits} == {2}, result.hits


# ---------------------------------------------------------- 5: one terminal state per version
def test_failed_after_completed_changes_nothing(stack, worker, tmp_path, project):
    """A FAILED event for a version that already COMPLETED (a retried batch failing
    after indexing) neither moves the projection nor fires a second outcome."""
    from adapters.metadata import Metadata
    from schemas import DocumentStatus, status_event

    outcome = ingest(_text_files(tmp_path, 1, "final"), project)
    document_id = outcome.results[0].document_id
    run(_wait_until(lambda: _status_is(stack, document_id, "COMPLETED"), 60, "the projection"))

    async def late_failure():
        async with Metadata(stack.pg_dsn) as md:
            won = await md.ledger.claim_outcome(document_id=document_id, version=1, project=project,
                                                outcome="FAILED", reason="index: late failure")
            moved = await md.apply_status(status_event(
                document_id, 1, DocumentStatus.FAILED, stage="index", project=project,
                error="index: late failure"))
            return won, moved, await md.get_document(document_id)

    won, moved, row = run(late_failure())
    assert won.outcome == "COMPLETED" and not moved and row["status"] == "COMPLETED"
    assert won.at > 0  # the claim time, which its status event carries (agents/outcomes)


# ---------------------------------------- 6 + 9: PostgreSQL away longer than any timeout
@pytest.mark.slow
def test_postgres_outage_fails_nothing_and_loses_no_status(stack, worker, tmp_path, project):
    """PostgreSQL stopped for 25 s in the middle of an ingest of 10 small files: every
    document still COMPLETES (stages wait; none FAILED), and the projection catches up
    with every status event (it never moved past an unwritten one)."""
    import devstack

    files = _text_files(tmp_path, 10, "pgdown")
    queued = ingest(files, project, wait=False)  # every upload registered before the outage
    wanted = {r.document_id: r.version for r in queued.results}

    async def scenario():
        from cli.progress import follow_until_terminal

        follow = asyncio.create_task(follow_until_terminal(
            wanted, Console(quiet=True), 600, since=time.time() - 120, settings=stack))
        await asyncio.sleep(1)
        await asyncio.to_thread(devstack.down, stack, names=["postgres"])
        await asyncio.sleep(25)
        await asyncio.to_thread(devstack.up, stack, names=["postgres"])
        return await follow

    last = run(scenario())
    assert {e.status for e in last.values()} == {"COMPLETED"}, last
    assert set(last) == set(wanted)
    for document_id in wanted:
        row = run(_wait_until(lambda d=document_id: _terminal(stack, d), 120, "the projection"))
        assert row["status"] == "COMPLETED" and row["chunks_total"] >= 1


# --------------------------------------------------- 7: delete wins against in-flight work
@pytest.mark.slow
def test_delete_during_ingest_of_a_long_document_leaves_nothing(stack, worker, tmp_path, project):
    """A delete sent while a 96-page PDF (3 page ranges) is in flight: the document
    ends DELETED, never COMPLETED after it, and Milvus holds none of its chunks."""
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from stages.samples import write_long_pdf
    from streams.ingest import queue_delete
    from streams.kafka_io import producer

    pdf = write_long_pdf(tmp_path / "long.pdf", pages=96)
    outcome = ingest([pdf], project, wait=False)
    res = outcome.results[0]

    async def delete_midway():
        await _wait_until(lambda: _stage_reached(stack, res.document_id, {"PARTITIONING", "CHUNKING",
                                                                          "EMBEDDING", "INDEXING"}),
                          180, "the long document to be in flight", every_s=0.2)
        async with Metadata(stack.pg_dsn) as md, producer(stack.kafka_bootstrap) as prod:
            await queue_delete(document_id=res.document_id, version=res.version, project=project,
                               category="default", filename=pdf.name, bucket=stack.bucket,
                               key=res.raw_key, sha256="", size=0, producer=prod, metadata=md)

    run(delete_midway())
    run(_wait_until(lambda: _status_is(stack, res.document_id, "DELETED"), 180, "DELETED"))
    time.sleep(20)  # in-flight ranges and batches finish (and must undo their writes)
    vectors = VectorStore(stack.milvus_uri)
    assert vectors.count_sync(project, res.document_id) == 0
    events = run(_statuses(stack, project))
    assert "COMPLETED" not in [e.status for e in events if e.document_id == res.document_id]
    assert run(_projected(stack, res.document_id))["status"] == "DELETED"


async def _stage_reached(settings, document_id, statuses):
    row = await _projected(settings, document_id)
    return row is not None and row["status"] in statuses


async def _status_is(settings, document_id, status):
    row = await _projected(settings, document_id)
    return row is not None and row["status"] == status


# --------------------------------------------------------------- 8: poison records
def test_poison_records_reach_the_dead_letter_topic_and_stall_nothing(stack, worker, tmp_path, project):
    """Bytes that are not a record (not JSON; JSON of the wrong shape) are dead-lettered
    with their reason by the stage that read them, and a document right behind them
    completes."""
    from streams.kafka_io import producer, read_topic, send_raw
    from topics import CHUNKS, DEAD_LETTERS, UPLOADS

    marker = f"poison-{project}".encode()

    async def produce_poison():
        async with producer(stack.kafka_bootstrap) as prod:
            await send_raw(prod, UPLOADS.name, marker, b"\x00not json at all")
            await send_raw(prod, CHUNKS.name, marker, orjson.dumps({"document_id": project}))

    run(produce_poison())
    outcome = ingest(_text_files(tmp_path, 1, "behind-poison"), project, timeout_s=120)
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}

    async def letters():
        out = []
        async for rec in read_topic(stack.kafka_bootstrap, DEAD_LETTERS.name):
            if rec.key == marker:
                out.append(orjson.loads(rec.value))
        return out

    found = run(_wait_until(lambda: _two(letters), 60, "two dead letters"))
    by_stage = {d["stage"]: d for d in found}
    assert set(by_stage) == {"normalize", "enhance"}, found
    assert all(d["reason_code"] == "undecodable" for d in found)
    assert "not JSON" in by_stage["normalize"]["error"]
    assert "missing field" in by_stage["enhance"]["error"]


async def _two(fetch):
    got = await fetch()
    return got if len(got) >= 2 else None


# -------------------------------------------------------------- 10: blank page ranges
@pytest.mark.slow
def test_blank_page_range_does_not_fail_the_document_and_chunks_once(stack, worker, tmp_path, project):
    """A 70-page PDF whose pages 33-64 are blank (one whole page range) COMPLETES,
    and its chunks are produced once (one CHUNKING, each chunk id once on the topic)."""
    from streams.kafka_io import read_topic
    from topics import CHUNKS

    pdf = _pdf_with_blank_pages(tmp_path / "gappy.pdf", 70, range(33, 65))
    outcome = ingest([pdf], project)
    res = outcome.results[0]
    last = outcome.last[res.document_id]
    assert last.status == "COMPLETED", last
    events = [e for e in run(_statuses(stack, project)) if e.document_id == res.document_id]
    assert [e.status for e in events].count("CHUNKING") == 1

    async def chunk_ids():
        return [orjson.loads(r.value)["chunk_id"] async for r in read_topic(stack.kafka_bootstrap, CHUNKS.name)
                if r.key == res.document_id.encode()]

    ids = run(chunk_ids())
    assert len(ids) == len(set(ids)) == last.chunks_total


# -------------------------------------------------------- 13: ids belong to their project
def test_same_document_id_in_another_project_is_another_document(stack, worker, tmp_path, project):
    """``ingest -p B --document-id <A's id>`` makes B's own document (ids are scoped per
    project, streams/document_ids.py: no "in use" answer to probe or squat with); A's
    document is untouched."""
    outcome = ingest(_text_files(tmp_path / "a", 1, "owner"), project, document_id="shared-id")
    other = ingest(_text_files(tmp_path / "b", 1, "intruder"), project + "b", document_id="shared-id")
    mine, theirs = outcome.results[0], other.results[0]
    assert mine.local_id == theirs.local_id == "shared-id" and mine.document_id != theirs.document_id
    assert other.last[theirs.document_id].status == "COMPLETED" and theirs.version == 1
    row = run(_wait_until(lambda: _terminal(stack, mine.document_id), 60, "the projection"))
    assert row["project"] == project and row["status"] == "COMPLETED" and row["version"] == 1
