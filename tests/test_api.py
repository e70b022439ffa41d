"""The HTTP API against the real test stack and worker: uploads over HTTP reach
COMPLETED, the SSE stream carries every transition in order, keys and projects are
enforced, oversize uploads are refused without storing anything, DELETE empties
Milvus and storage, and schemathesis finds no 500 in the OpenAPI spec."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

import httpx
import pytest

from api_helpers import (UPLOAD_LIMIT, SseReader, create_key, upload,
                         wait_status)
from conftest import run
from streams.document_ids import scoped_id

PIPELINE = ["QUEUED", "NORMALIZING", "PARTITIONING", "CHUNKING", "ENHANCING", "EMBEDDING",
            "INDEXING", "COMPLETED"]


@pytest.fixture(scope="module")
def samples(stack):
    from stages.samples import generate_samples

    pdf, docx, html = generate_samples(stack.data_dir / "api-samples")
    return {"pdf": pdf, "docx": docx, "html": html}


def _keys_under(settings, prefix: str) -> list[str]:
    from adapters.object_store import ObjectStore

    async def go():
        async with ObjectStore(settings) as store:
            return [k async for k in store.list_keys(prefix)]

    return run(go())


def _versions(settings, project: str) -> int:
    import asyncpg

    async def go():
        conn = await asyncpg.connect(settings.pg_dsn)
        try:
            return await conn.fetchval("SELECT count(*) FROM document_versions WHERE project = $1", project)
        finally:
            await conn.close()

    return run(go())


def _kafka_transitions(settings, document_id: str) -> list[tuple[str, int]]:
    from streams.kafka_io import status_history

    async def go():
        return [(ev.status, ev.seq) for ev in await status_history(settings.kafka_bootstrap)
                if ev.document_id == document_id]

    return run(go())


def test_missing_or_wrong_key_is_401(api, project):
    bogus = "rsk_0123456789abcdef." + "x" * 43
    for headers in ({}, {"X-API-Key": "nonsense"}, {"X-API-Key": bogus}):
        for method, path in (("GET", "/v1/documents"), ("GET", "/v1/documents/doc-x"),
                             ("DELETE", "/v1/documents/doc-x"), ("GET", "/v1/stats"),
                             ("GET", "/v1/status/stream")):
            r = httpx.request(method, api.url + path, headers=headers, timeout=10)
            assert r.status_code == 401, (method, path, headers, r.text)
        r = httpx.post(api.url + "/v1/documents", headers=headers, files={"file": ("a.txt", b"hello")},
                       data={"project": project}, timeout=10)
        assert r.status_code == 401
    key = create_key(project)
    assert httpx.get(api.url + "/v1/documents", headers={"X-API-Key": key}).status_code == 200
    key_id = key.split("_", 1)[1].split(".", 1)[0]
    subprocess.run([sys.executable, "-m", "cli.main", "apikey", "revoke", key_id], check=True,
                   capture_output=True, timeout=60)
    assert httpx.get(api.url + "/v1/documents", headers={"X-API-Key": key}).status_code == 401
    assert httpx.get(api.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(api.url + "/readyz").json()
    assert ready["ready"] and set(ready["checks"]) >= {"broker", "database", "object_store", "milvus"}
    assert "ragstream_api_request_seconds" in httpx.get(api.url + "/metrics").text


@pytest.mark.slow
def test_upload_pdf_over_http_completes_and_sse_has_every_transition(api, project, samples, stack):
    key = create_key(project)
    sse = SseReader(api.url, key)
    try:
        t0 = time.time()
        r = upload(api.url, key, samples["pdf"], project=project, category="default")
        assert r.status_code == 202, r.text
        body = r.json()
        doc = body["document_id"]
        assert body["version"] == 1 and body["queued"] is True
        assert body["status_url"] == f"/v1/documents/{doc}"
        assert body["sha256"] == hashlib.sha256(samples["pdf"].read_bytes()).hexdigest()
        final = wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})
        elapsed = time.time() - t0
        assert final["status"] == "COMPLETED", final
        assert final["version"] == 1 and final["chunks_total"] > 0
        assert final["chunks_done"] == final["chunks_total"] and final["pages"] >= 1
        assert final["output"]["key"] == f"processed/{project}/{scoped_id(project, doc)}/v1.json"
        assert final["output"]["key"] in _keys_under(stack, f"processed/{project}/")
        events = sse.wait_for(doc, {"COMPLETED"})
    finally:
        sse.close()
    got = [(e["status"], e["seq"]) for e in events]
    assert [s for s, _ in got] == PIPELINE, got
    assert [q for _, q in got] == sorted(q for _, q in got)
    assert got == _kafka_transitions(stack, scoped_id(project, doc))  # every transition on the topic, in order
    # the file name is sealed on the topic (schemas/sealing.py); the project's stream shows it
    assert {e["filename"] for e in events} == {samples["pdf"].name} and not any("sealed" in e for e in events)
    assert all(e["document_id"] == doc for e in events)
    print(f"\nPDF upload → COMPLETED over HTTP: {elapsed:.1f} s, {final['chunks_total']} chunks")

    again = upload(api.url, key, samples["pdf"], project=project)
    assert again.status_code == 202
    assert again.json()["queued"] is False and again.json()["version"] == 1
    assert again.json()["reason"] == "unchanged"

    listing = httpx.get(api.url + "/v1/documents", params={"project": project, "status": "COMPLETED",
                                                           "limit": 1},
                        headers={"X-API-Key": key}).json()
    assert listing["total"] == 1 and listing["items"][0]["document_id"] == doc
    assert listing["items"][0]["category"] == "default" and listing["next_offset"] is None

    other = create_key("o" + uuid.uuid4().hex[:10])
    for method in ("GET", "DELETE"):
        r = httpx.request(method, f"{api.url}/v1/documents/{doc}", headers={"X-API-Key": other})
        assert r.status_code == 404, r.text
    r = httpx.get(api.url + "/v1/documents", params={"project": project}, headers={"X-API-Key": other})
    assert r.status_code == 404
    r = upload(api.url, other, samples["html"], project=project)
    assert r.status_code == 403


def test_listing_pages(api, project, stack):
    """Paging while the documents pass their stages (their updated_at changes between
    pages): every document exactly once, by offset and by cursor; a cursor stays exact
    when a document is uploaded mid-listing."""
    key = create_key(project)
    headers = {"X-API-Key": key}

    def add(name: str) -> str:
        r = httpx.post(api.url + "/v1/documents", headers=headers,
                       files={"file": (name, f"# {name}\n\nbody of {name}\n".encode())},
                       data={"project": project, "category": "default"})
        assert r.status_code == 202, r.text
        return r.json()["document_id"]

    ids = [add(f"note-{i}.md") for i in range(5)]
    for _ in range(3):  # the documents move through their stages while this pages
        seen, offset = [], 0
        while offset is not None:
            page = httpx.get(api.url + "/v1/documents", params={"limit": 2, "offset": offset},
                             headers=headers).json()
            assert page["total"] == 5 and len(page["items"]) <= 2
            seen += [d["document_id"] for d in page["items"]]
            offset = page["next_offset"]
        assert sorted(seen) == sorted(ids)

    seen, params = [], {"limit": 2}
    while True:
        page = httpx.get(api.url + "/v1/documents", params=params, headers=headers).json()
        seen += [d["document_id"] for d in page["items"]]
        if len(seen) == 2:
            late = add("late.md")  # newest, so before the cursor: not on a later page
        if page["next_cursor"] is None:
            break
        assert "cursor" not in params or page["next_offset"] is None
        params = {"limit": 2, "cursor": page["next_cursor"]}
    assert sorted(seen) == sorted(ids) and late not in seen
    first = httpx.get(api.url + "/v1/documents", params={"limit": 1}, headers=headers).json()
    assert first["items"][0]["document_id"] == late and first["total"] == 6

    for params in ({"status": "NOPE"}, {"cursor": "not-a-cursor"}, {"cursor": "x" * 600},
                   {"cursor": first["next_cursor"], "offset": 1}):
        bad = httpx.get(api.url + "/v1/documents", params=params, headers=headers)
        assert bad.status_code == 422, (params, bad.text)


def test_oversize_upload_is_413_and_nothing_is_stored(api, project, stack):
    key = create_key(project)
    big = os.urandom(UPLOAD_LIMIT + 1)
    r = httpx.post(api.url + "/v1/documents", headers={"X-API-Key": key},
                   files={"file": ("big.pdf", big)}, data={"project": project}, timeout=60)
    assert r.status_code == 413, r.text

    # no Content-Length (chunked): the limit trips while streaming, the S3 upload is aborted
    boundary = "rsb" + uuid.uuid4().hex

    def body():
        yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\n{project}\r\n"
               f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
               "Content-Type: application/octet-stream\r\n\r\n").encode()
        for _ in range(UPLOAD_LIMIT // (256 * 1024) + 8):  # 256 KiB blocks, past the limit
            yield b"\0" * (256 * 1024)
        yield f"\r\n--{boundary}--\r\n".encode()

    r = httpx.post(api.url + "/v1/documents", content=body(), timeout=60,
                   headers={"X-API-Key": key, "Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert r.status_code == 413, r.text
    assert _keys_under(stack, f"raw/{project}/") == []
    assert _keys_under(stack, f"staging/{project}/") == []
    assert _versions(stack, project) == 0

    from adapters.object_store import ObjectStore

    async def no_pending_multipart():
        async with ObjectStore(stack) as store:
            resp = await store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=f"staging/{project}/")
            return resp.get("Uploads") or []

    assert run(no_pending_multipart()) == []

    empty = httpx.post(api.url + "/v1/documents", headers={"X-API-Key": key},
                       files={"file": ("empty.pdf", b"")}, data={"project": project})
    assert empty.status_code == 422


def test_streamed_upload_memory_is_bounded(stack, project):
    """48 MiB through the staging writer: multipart S3 upload, correct hash and size,
    at most one 8 MiB part buffered (tracemalloc peak well below the file size)."""
    from adapters.object_store import ObjectStore
    from api.uploads import PART_BYTES, StagingWriter

    size = 48 * 1024 * 1024
    block = os.urandom(64 * 1024)

    async def go():
        async with ObjectStore(stack) as store:
            await store.ensure_bucket()
            key = f"staging/{project}/mem-test"
            writer = StagingWriter(store, key, max_bytes=size)
            digest = hashlib.sha256()
            tracemalloc.start()
            for _ in range(size // len(block)):
                await writer.write(block)
                digest.update(block)
            n, sha = await writer.finish()
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            head = await store.client.head_object(Bucket=store.bucket, Key=key)
            await store.client.delete_object(Bucket=store.bucket, Key=key)
            return n, sha, digest.hexdigest(), head["ContentLength"], writer.peak_buffer, peak

    n, sha, expected, stored, peak_buffer, peak = run(go())
    assert n == size == stored and sha == expected
    assert peak_buffer < PART_BYTES + len(block)
    assert peak < 3 * PART_BYTES, f"tracemalloc peak {peak / 2**20:.1f} MiB for a 48 MiB upload"
    print(f"\n48 MiB streamed: peak buffer {peak_buffer / 2**20:.1f} MiB, "
          f"tracemalloc peak {peak / 2**20:.1f} MiB")


def test_reference_upload(api, project, stack, samples):
    from adapters.object_store import ObjectStore

    key = create_key(project)

    async def put():
        async with ObjectStore(stack) as store:
            await store.ensure_bucket()
            await store.put_file(f"incoming/{project}/report.html", samples["html"], "text/html")
            return store.bucket

    bucket = run(put())
    r = httpx.post(api.url + "/v1/documents", headers={"X-API-Key": key}, json={
        "project": project, "category": "default",
        "source": {"bucket": bucket, "key": f"incoming/{project}/report.html"}})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["queued"] and body["sha256"] == hashlib.sha256(samples["html"].read_bytes()).hexdigest()
    row = httpx.get(api.url + body["status_url"], headers={"X-API-Key": key}).json()
    assert row["filename"] == "report.html" and row["size"] == samples["html"].stat().st_size
    outside = httpx.post(api.url + "/v1/documents", headers={"X-API-Key": key}, json={
        "source": {"bucket": bucket, "key": "raw/other/secret.pdf"}})
    assert outside.status_code == 403


@pytest.mark.slow
def test_delete_removes_chunks_objects_and_ends_deleted(api, project, samples, stack):
    from adapters.vector_store import VectorStore

    key = create_key(project)
    r = upload(api.url, key, samples["html"], project=project, category="default")
    doc = r.json()["document_id"]
    assert wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})["status"] == "COMPLETED"
    vectors = VectorStore(stack.milvus_uri)
    try:
        assert run(vectors.count(project, scoped_id(project, doc))) > 0
        assert _keys_under(stack, f"raw/{project}/") and _keys_under(stack, f"processed/{project}/{scoped_id(project, doc)}/")
        t0 = time.time()
        d = httpx.delete(f"{api.url}/v1/documents/{doc}", headers={"X-API-Key": key})
        assert d.status_code == 202, d.text
        final = wait_status(api.url, key, doc, {"DELETED"}, timeout_s=120)
        print(f"\nDELETE → DELETED: {time.time() - t0:.1f} s")
        assert final["status"] == "DELETED"
        assert (final["sha256"], final["size"]) == ("", 0)  # they would confirm a guess of its bytes
        assert run(vectors.count(project, scoped_id(project, doc))) == 0
    finally:
        vectors.close()
    for area in ("raw", "processed", "work"):
        assert [k for k in _keys_under(stack, f"{area}/{project}/") if doc in k] == [], area


@pytest.mark.slow
def test_schemathesis_finds_no_server_error(api, project, tmp_path):
    """Property-based requests from the OpenAPI spec (bounded: few examples, one
    worker); the SSE stream is excluded because it never ends by design."""
    key = create_key(project)
    cmd = [str(Path(sys.executable).parent / "st"), "run", f"{api.url}/openapi.json",
           "-H", f"X-API-Key: {key}", "--checks", "not_a_server_error", "--max-examples", "6",
           "--exclude-path", "/v1/status/stream", "--workers", "1", "--seed", "20261130",
           "--report-dir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    tail = "\n".join(out.stdout.splitlines()[-25:])
    assert out.returncode == 0, tail
    assert "passed" in out.stdout, tail
    print("\n" + "\n".join(line for line in out.stdout.splitlines() if "generated" in line))


def test_readiness_checks_triton_only_when_it_is_the_embedder(stack):
    """With ``embedder="triton"`` and nothing listening on the Triton port, /readyz's
    checks include a failing ``triton`` (→ 503); with ``onnx`` there is no such check."""
    from api_helpers import free_port
    from api.app import readiness
    from api.state import ApiState

    async def checks(settings):
        state = ApiState(settings)
        try:
            await state.open()
            return await readiness(state)
        finally:
            await state.close()

    with_triton = run(checks(stack.model_copy(update={"embedder": "triton",
                                                      "triton_http_port": free_port()})))
    assert with_triton["triton"]["ok"] is False and "error" in with_triton["triton"]
    assert all(with_triton[k]["ok"] for k in ("broker", "database", "object_store", "milvus"))
    without = run(checks(stack.model_copy(update={"embedder": "onnx"})))
    assert "triton" not in without and all(c["ok"] for c in without.values())
