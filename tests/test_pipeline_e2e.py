"""The whole pipeline against the real test stack: Tansu broker, SeaweedFS,
PostgreSQL, Milvus Lite and an all-stages Faust worker."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import ingest, run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    from stages.samples import generate_samples

    return generate_samples(tmp_path_factory.mktemp("samples"))


async def _status_history(settings, document_id):
    from streams.kafka_io import status_history

    return [ev for ev in await status_history(settings.kafka_bootstrap) if ev.document_id == document_id]


def test_samples_flow_to_milvus_with_every_transition(stack, worker, samples, project):
    from adapters.object_keys import processed_key
    from adapters.object_store import ObjectStore
    from adapters.vector_store import VectorStore
    from search.query import search

    outcome = ingest(samples, project)
    assert not outcome.timed_out
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}, outcome.last
    vectors = VectorStore(stack.milvus_uri)
    pdf = next(r for r in outcome.results if r.path.suffix == ".pdf")
    for r in outcome.results:
        assert vectors.count_sync(project, r.document_id, r.version) == outcome.last[r.document_id].chunks_total > 0

    # every transition, in order, exactly one COMPLETED
    history = run(_status_history(stack, pdf.document_id))
    statuses = [e.status for e in history]
    assert statuses == ["QUEUED", "NORMALIZING", "PARTITIONING", "CHUNKING", "ENHANCING",
                        "EMBEDDING", "INDEXING", "COMPLETED"]
    assert [e.seq for e in history] == sorted(e.seq for e in history)

    # processed output and raw object in object storage
    async def _objects():
        async with ObjectStore(stack) as store:
            body = orjson.loads(await store.get_bytes(processed_key(project, pdf.document_id, 1)))
            raw = [k async for k in store.list_keys(f"raw/{project}/default/v1/")]
        return body, raw
    body, raw = run(_objects())
    assert len(body["chunks"]) == outcome.last[pdf.document_id].chunks_total
    assert f"raw/{project}/default/v1/{pdf.document_id}.pdf" in raw

    # PDF chunks keep true page numbers; a search finds the table with its page
    pages = {c["page_number"] for c in body["chunks"]}
    assert len(pages) >= 2 and min(pages) >= 1
    hits = run(search("energy use per megalitre West Hollow", project=project, k=5, settings=stack)).hits
    assert hits and all(h["project"] == project for h in hits)
    assert any("West Hollow" in h["text"] for h in hits)

    # bench peer's characters embedded: every stored chunk's embedded text, read back
    from bench.embedded_chars import embedded_chars, project_embed_texts

    texts = project_embed_texts(stack.milvus_uri, project)
    assert len(texts) == sum(e.chunks_total for e in outcome.last.values())
    assert any("West Hollow" in t for t in texts)
    counted = embedded_chars(texts)
    assert counted.cut == 0 and counted.embedded == counted.total > 0  # ragstream's chunks fit the limit
    assert project_embed_texts(stack.milvus_uri, project + "x") == []  # no collection: nothing


def test_status_projection_reaches_postgres(stack, worker, samples, project):
    from adapters.metadata import Metadata

    outcome = ingest(samples[:1], project)
    doc = outcome.results[0].document_id

    async def _row():
        async with Metadata(stack.pg_dsn) as md:
            for _ in range(40):
                row = await md.get_document(doc)
                if row and row["status"] == "COMPLETED":
                    return row
                await asyncio.sleep(0.25)
            return row
    row = run(_row())
    assert row["status"] == "COMPLETED" and row["chunks_total"] > 0 and row["error"] is None

    # `ragstream status --json`: the same row, one JSON object per line, not cut to a width
    proc = subprocess.run([str(Path(sys.executable).with_name("ragstream")), "status", "--json",
                           "-p", project], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS="40"))
    assert proc.returncode == 0, proc.stderr
    shown = [orjson.loads(line) for line in proc.stdout.splitlines()]
    mine = [r for r in shown if r["document_id"] == doc]
    assert len(mine) == 1 and mine[0]["status"] == "COMPLETED", proc.stdout
    assert mine[0]["filename"] == row["filename"] and mine[0]["chunks_total"] == row["chunks_total"]


def test_reingest_same_and_changed_file(stack, worker, tmp_path, project):
    from adapters.vector_store import VectorStore

    doc = tmp_path / "notes.md"
    doc.write_text("# Pumps\n\nThe north pump station runs three duty pumps.\n\n"
                   "## Valves\n\nGate valves are exercised every spring.\n")
    first = ingest([doc], project)
    r1 = first.results[0]
    assert first.last[r1.document_id].status == "COMPLETED"

    # the same bytes again: nothing queued, nothing duplicated
    again = ingest([doc], project)
    assert not again.results[0].queued and again.results[0].version == 1

    # forced redelivery of the same version: still no duplicate primary keys
    forced = ingest([doc], project, force=True, wait=False)
    assert forced.results[0].queued
    vectors = VectorStore(stack.milvus_uri)

    # a changed file under the same name becomes version 2 and replaces version 1
    doc.write_text("# Pumps\n\nThe north pump station now runs four duty pumps.\n")
    second = ingest([doc], project)
    r2 = second.results[0]
    assert (r2.document_id, r2.version) == (r1.document_id, 2)
    assert second.last[r2.document_id].status == "COMPLETED"
    ids = vectors.chunk_ids_sync(project, r1.document_id)
    assert len(ids) == len(set(ids)) == second.last[r2.document_id].chunks_total
    assert vectors.count_sync(project, r1.document_id, 1) == 0
    assert all(i.startswith(f"{r1.document_id}:2:") for i in ids)

    # exactly one COMPLETED per version on the changelog, despite the redelivery
    history = run(_status_history(stack, r1.document_id))
    completed = [(e.version, e.status) for e in history if e.status == "COMPLETED"]
    assert completed == [(1, "COMPLETED"), (2, "COMPLETED")]


def test_bad_documents_fail_with_specific_reasons_and_others_complete(stack, worker, tmp_path, project):
    from pypdf import PdfWriter

    from stages.samples import generate_samples

    good = generate_samples(tmp_path / "good")[0]
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(good.read_bytes()[:1500])
    encrypted = tmp_path / "encrypted.pdf"
    writer = PdfWriter(clone_from=str(good))
    writer.encrypt(user_password="secret", owner_password="owner")
    with open(encrypted, "wb") as fh:
        writer.write(fh)
    binary = tmp_path / "random.docx"
    binary.write_bytes(bytes(range(256)) * 64)

    outcome = ingest([empty, truncated, encrypted, binary, good], project)
    by_name = {r.path.name: outcome.last[r.document_id] for r in outcome.results}
    assert by_name[good.name].status == "COMPLETED"
    reasons = {}
    for name in ("empty.pdf", "truncated.pdf", "encrypted.pdf", "random.docx"):
        ev = by_name[name]
        assert ev.status == "FAILED", (name, ev)
        assert ev.error and ev.error.lower() != "failed"
        reasons[name] = ev.error
    assert "encrypt" in reasons["encrypted.pdf"].lower()
    assert "zero" in reasons["empty.pdf"].lower() or "empty" in reasons["empty.pdf"].lower()
    assert len(set(reasons.values())) == 4, reasons
    codes = {name: by_name[name].error_code for name in reasons}
    assert codes == {"empty.pdf": "empty", "truncated.pdf": "corrupt", "encrypted.pdf": "encrypted",
                     "random.docx": "unsupported_type"}, (codes, reasons)
