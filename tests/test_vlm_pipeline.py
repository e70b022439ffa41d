"""VLM enrichment through the whole pipeline: the real test stack and a worker whose
``RAGSTREAM_VLM_BASE_URL`` points at the stand-in chat-completions server of
tests/vlm_server.py (no vision-language model can run here; that server is the only
mock).  The session worker is stopped first (marked ``drill``: runs last), so this
worker is the only member of the stage groups and every chunk meets the VLM setting.
"""
from __future__ import annotations

import asyncio
import time
import urllib.request

import pytest
from rich.console import Console

from tests.conftest import WORKER_METRICS_PORT, run
from tests.process_helpers import wait_for_line
from tests.vlm_server import VlmServer, image_summary, table_summary

pytestmark = [pytest.mark.slow, pytest.mark.drill, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def vlm():
    server = VlmServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def vlm_worker(stack, worker, vlm):
    from devstack.worker_process import start_worker, stop_worker

    stop_worker(worker)
    log = stack.data_dir / "logs" / "vlm-worker.log"
    log.unlink(missing_ok=True)
    proc = start_worker(log, env={"RAGSTREAM_VLM_BASE_URL": vlm.url, "RAGSTREAM_VLM_MODEL": "stand-in",
                                  "RAGSTREAM_VLM_MAX_RETRIES": "1", "RAGSTREAM_VLM_TIMEOUT_S": "5",
                                  "RAGSTREAM_METRICS_PORT": str(WORKER_METRICS_PORT)})
    wait_for_line(log, "ready,", proc, 120)
    yield proc
    stop_worker(proc)


@pytest.fixture(scope="module")
def pdf(stack):
    from stages.samples import generate_samples

    return generate_samples(stack.data_dir / "vlm-samples")[0]


def _ingest(path, project, category="default"):
    from cli.progress import ingest_and_follow

    outcome = run(ingest_and_follow([path], project=project, category=category, timeout_s=300,
                                    console=Console(quiet=True)))
    assert not outcome.timed_out
    doc = outcome.results[0].document_id
    assert outcome.last[doc].status == "COMPLETED", outcome.last[doc]
    return doc, outcome.last[doc].chunks_total


async def _enhanced(bootstrap: str, document_id: str, total: int, timeout_s: float = 60):
    """The enhanced chunks of ``document_id`` from the topic, by index (opened with
    their version's data key: schemas/sealing.py)."""
    import asyncpg
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from adapters.document_keys import DocumentKeys
    from schemas import Chunk, decode_event
    from streams.settings import get_settings
    from topics.catalogue import ENHANCED

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    conn = await asyncpg.connect(get_settings().pg_dsn)
    keys = DocumentKeys(conn)
    try:
        parts = consumer.partitions_for_topic(ENHANCED.name) or set()
        if not parts:
            await consumer._client.force_metadata_update()  # noqa: SLF001
            parts = consumer.partitions_for_topic(ENHANCED.name)
        consumer.assign([TopicPartition(ENHANCED.name, p) for p in parts])
        await consumer.seek_to_beginning()
        found: dict[int, Chunk] = {}
        deadline = time.monotonic() + timeout_s
        while len(found) < total and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for rec in records:
                    chunk = decode_event(Chunk, rec.value)
                    if chunk.document_id == document_id:
                        found[chunk.index] = (await keys.open(chunk))[0]
        return found
    finally:
        await conn.close()
        await consumer.stop()


def _metric(name: str, **labels) -> float:
    """A metric of the worker's enhance process (each stage is a process of its own)."""
    from prometheus_client.parser import text_string_to_metric_families

    from streams.worker import stage_metrics_port

    port = stage_metrics_port(WORKER_METRICS_PORT, "enhance")
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    total = 0.0
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def assert_embedded(chunk, body: str) -> None:
    """``chunk.embed_text`` is ``body`` after the document's contextual header (or a
    word prefix of it, when the limit cut it: stages.enhance.with_header)."""
    from stages.enhance import document_header

    assert chunk.embed_text.endswith(body), chunk.embed_text[:300]
    head = chunk.embed_text[: len(chunk.embed_text) - len(body)]
    assert head == "" or (head.endswith("\n\n") and document_header(chunk.filename).startswith(head[:-2])), head


def test_tables_and_images_get_summaries_that_are_embedded_and_found(stack, vlm_worker, vlm, pdf, project):
    from adapters.object_keys import split_uri
    from adapters.object_store import ObjectStore
    from search.query import search
    from stages.enhance import render_table

    doc, total = _ingest(pdf, project)
    chunks = run(_enhanced(stack.kafka_bootstrap, doc, total))
    assert len(chunks) == total
    tables = [c for c in chunks.values() if "Table" in c.element_types]
    images = [c for c in chunks.values() if c.image_keys]
    assert tables and len(images) == 1
    for t in tables:
        assert t.summary == table_summary(t.table_html) and t.enrichment["vlm"] == "ok"
        assert_embedded(t, t.summary + "\n\n" + render_table(t.table_html, t.text))
    assert any(t.table_html in " ".join(r.texts) for r in vlm.requests for t in tables)

    (image,) = images
    bucket, key = split_uri(image.image_keys[0])
    assert key.startswith(f"work/{project}/{doc}/v1/images/")

    async def crop():
        async with ObjectStore(stack) as store:
            return await store.get_bytes(key, bucket=bucket)
    png = run(crop())
    assert png.startswith(b"\x89PNG")
    assert any(r.images == [png] for r in vlm.requests)  # the crop went as base64
    assert image.summary == image_summary(png) and image.summary in image.embed_text
    assert image.text.startswith(image.summary) and image.text.endswith("Image on page 2")
    assert image.enrichment["prompt_tokens"] > 0

    sentence = image.summary.split(" (")[0]
    hits = run(search(sentence, project=project, k=3, settings=stack)).hits
    assert hits and hits[0]["chunk_index"] == image.index, hits[:1]

    assert _metric("ragstream_vlm_calls_total", outcome="ok") >= len(tables) + 1
    assert _metric("ragstream_vlm_tokens_total", direction="completion") > 0
    assert _metric("ragstream_vlm_call_seconds_count") >= len(tables) + 1


def test_profile_without_vlm_never_calls_it(stack, vlm_worker, vlm, pdf, project):
    from adapters.profiles_store import ProfileStore
    from stages.profiles import Profile

    async def put():
        async with ProfileStore(stack.pg_dsn) as profiles:
            await profiles.put(Profile(name="novlm", use_vlm=False))
    run(put())
    before = len(vlm.requests)
    doc, total = _ingest(pdf, project, category="novlm")
    chunks = run(_enhanced(stack.kafka_bootstrap, doc, total))
    assert len(vlm.requests) == before
    assert not any(c.image_keys or c.summary or c.enrichment for c in chunks.values())


def test_vlm_down_documents_complete_with_the_deterministic_rendering(stack, vlm_worker, vlm, pdf, project):
    from stages.enhance import render_table

    vlm.stop()
    try:
        doc, total = _ingest(pdf, project)
    finally:
        vlm.start()
    chunks = run(_enhanced(stack.kafka_bootstrap, doc, total))
    tables = [c for c in chunks.values() if "Table" in c.element_types]
    assert tables
    for t in tables:
        assert t.summary is None
        assert_embedded(t, render_table(t.table_html, t.text))
        assert t.enrichment["vlm"] == "failed" and "ConnectError" in t.enrichment["reason"]
        assert t.enrichment["attempts"] == 2
    assert _metric("ragstream_vlm_calls_total", outcome="error") >= len(tables)
