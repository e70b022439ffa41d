"""User metadata end to end (issue 28 item 1) on the real API, stack and worker:
documents uploaded with metadata (multipart form field and JSON reference), searched
with filters over HTTP and from the CLI; every filter returns exactly the chunks
whose metadata satisfies it; a metadata change is a new version whose vectors all
come from the embedding cache; bad metadata and bad filters are 422 and store
nothing; a collection made before the field refuses metadata filters (409) but
still takes rows."""
from __future__ import annotations

import json
import time
import subprocess
import sys
import uuid
from typing import Any, Callable

import httpx
import pytest

from api_helpers import ROOT, create_key, upload, wait_status
from conftest import run

pytestmark = pytest.mark.integration

PHRASE = "The reservoir pump station logged its energy use per megalitre."
HOSTILE = 'o"ps\\ or project != "x'
DOCS: dict[str, dict[str, Any] | None] = {
    "alpha": {"team": "ops", "year": 2024, "ratio": 0.75, "tags": ["pumps", "energy"],
              "published": "2024-05-01", "public": True},
    "beta": {"team": "dev", "year": 2020, "tags": ["energy"], "published": "2020-11-30", "public": False},
    "gamma": {"team": HOSTILE, "year": 2022, "ratio": 1.5},
    "delta": None,
    # numbers where other documents hold booleans: Milvus alone matches 1 to true
    "epsilon": {"n": 1, "f": 0, "public": 1},
}


def same(m: dict, key: str, value: Any) -> bool:
    """``m[key] == value`` with booleans and numbers kept apart, as JSON types are."""
    return key in m and type(m[key]) is type(value) and m[key] == value


def search(api, key: str, **body) -> httpx.Response:
    return httpx.post(f"{api.url}/v1/search", json=body, headers={"X-API-Key": key}, timeout=120)


@pytest.fixture(scope="module")
def catalogue(api, stack, tmp_path_factory):
    """Four one-chunk documents of one project, three with metadata (one by JSON
    reference upload), all COMPLETED: ``{"key", "project", "ids": {name: id}}``."""
    project = "m" + uuid.uuid4().hex[:10]
    key = create_key(project)
    folder = tmp_path_factory.mktemp("metadata-docs")
    ids = {}
    for name, meta in DOCS.items():
        path = folder / f"{name}.txt"
        path.write_text(f"{name.title()} report. {PHRASE}\n")
        if name == "gamma":  # a JSON reference upload, from the project's incoming/ prefix
            object_key = f"incoming/{project}/{path.name}"
            run(_put_object(stack, object_key, path.read_bytes()))
            r = httpx.post(f"{api.url}/v1/documents", headers={"X-API-Key": key}, timeout=60,
                           json={"source": {"bucket": stack.bucket, "key": object_key}, "metadata": meta})
        else:
            fields = {"metadata": json.dumps(meta)} if meta is not None else {}
            r = upload(api.url, key, path, **fields)
        assert r.status_code == 202, r.text
        ids[name] = r.json()["document_id"]
    for name, doc in ids.items():
        body = wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})
        assert body["status"] == "COMPLETED", body
        assert body["metadata"] == DOCS[name]
    return {"key": key, "project": project, "ids": ids}


async def _put_object(settings, key: str, data: bytes) -> None:
    from adapters.object_store import ObjectStore

    async with ObjectStore(settings) as store:
        await store.client.put_object(Bucket=store.bucket, Key=key, Body=data)


def _all_hits(api, catalogue) -> list[dict]:
    r = search(api, catalogue["key"], query=PHRASE, k=100)
    assert r.status_code == 200, r.text
    return r.json()["hits"]


FILTERS: list[tuple[dict, Callable[[dict], bool]]] = [
    ({"team": "ops"}, lambda m: m.get("team") == "ops"),
    ({"team": HOSTILE}, lambda m: m.get("team") == HOSTILE),
    ({"year": {"$gte": 2021}}, lambda m: m.get("year", 0) >= 2021),
    ({"year": {"$gt": 2019, "$lt": 2023}}, lambda m: 2019 < m.get("year", 0) < 2023),
    ({"ratio": {"$lte": 1.0}}, lambda m: "ratio" in m and m["ratio"] <= 1.0),
    ({"team": {"$in": ["ops", "dev"]}}, lambda m: m.get("team") in ("ops", "dev")),
    ({"team": {"$nin": ["ops"]}}, lambda m: "team" in m and m["team"] != "ops"),
    ({"team": {"$ne": "dev"}}, lambda m: "team" in m and m["team"] != "dev"),
    ({"tags": {"$contains": "pumps"}}, lambda m: "pumps" in m.get("tags", [])),
    ({"tags": {"$contains_any": ["energy", "x"]}}, lambda m: "energy" in m.get("tags", [])),
    ({"published": {"$gte": "2024-01-01"}}, lambda m: m.get("published", "") >= "2024-01-01"),
    ({"public": False}, lambda m: m.get("public") is False),
    ({"team": {"$exists": False}}, lambda m: "team" not in m),
    ({"team": "ops", "year": 2020}, lambda m: False),
    # booleans are not numbers (a newcomer found {"n": true} returning n = 1)
    ({"n": True}, lambda m: same(m, "n", True)),
    ({"f": False}, lambda m: same(m, "f", False)),
    ({"n": {"$in": [True]}}, lambda m: same(m, "n", True)),
    ({"public": 1}, lambda m: same(m, "public", 1)),
    ({"public": True}, lambda m: same(m, "public", True)),
    ({"n": 1}, lambda m: same(m, "n", 1)),
    # and not-equal keeps a stored 1 for true (Milvus' != alone dropped it)
    ({"n": {"$ne": True}}, lambda m: "n" in m and not same(m, "n", True)),
    ({"public": {"$ne": 1}}, lambda m: "public" in m and not same(m, "public", 1)),
    ({"public": {"$nin": [True]}}, lambda m: "public" in m and not same(m, "public", True)),
    ({"f": {"$nin": [0]}}, lambda m: "f" in m and not same(m, "f", 0)),
]


@pytest.mark.parametrize("spec, holds", FILTERS, ids=[json.dumps(f) for f, _ in FILTERS])
def test_a_filter_returns_exactly_the_matching_chunks(api, catalogue, spec, holds):
    everything = _all_hits(api, catalogue)
    assert {h["document_id"] for h in everything} == set(catalogue["ids"].values())
    expected = {(h["document_id"], h["text"]) for h in everything if holds(h["metadata"] or {})}
    r = search(api, catalogue["key"], query=PHRASE, k=100, metadata_filter=spec)
    assert r.status_code == 200, r.text
    got = {(h["document_id"], h["text"]) for h in r.json()["hits"]}
    assert got == expected


def test_hits_carry_their_documents_metadata(api, catalogue):
    by_doc = {h["document_id"]: h["metadata"] for h in _all_hits(api, catalogue)}
    assert by_doc == {catalogue["ids"][name]: meta for name, meta in DOCS.items()}


@pytest.mark.parametrize("spec", [{"team": {"$regex": "o"}}, {'team"] or true or metadata["x': 1},
                                  {"year": {"$gt": True}}, {"team": {"$in": []}}, ["team"]])
def test_a_bad_filter_is_a_422(api, catalogue, spec):
    r = search(api, catalogue["key"], query=PHRASE, metadata_filter=spec)
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("meta", ['{"team": ', '["a"]', '{"a.b": 1}', '{"k": {"nested": 1}}', '{"k": null}'])
def test_bad_metadata_at_upload_is_a_422_and_stores_nothing(api, catalogue, tmp_path, meta):
    path = tmp_path / f"bad-{uuid.uuid4().hex[:6]}.txt"
    path.write_text(PHRASE)
    r = upload(api.url, catalogue["key"], path, metadata=meta)
    assert r.status_code == 422, r.text
    listing = httpx.get(f"{api.url}/v1/documents", headers={"X-API-Key": catalogue["key"]}, timeout=30).json()
    assert path.name not in {d["filename"] for d in listing["items"]}


def test_the_cli_filters_with_equality(catalogue, stack):
    out = subprocess.run([sys.executable, "-m", "cli.main", "search", PHRASE, "-p", catalogue["project"],
                          "-k", "50", "--json", "--metadata-filter", '{"team": "dev"}'],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout.strip().splitlines()[-1])["hits"]
    assert hits and {h["metadata"]["team"] for h in hits} == {"dev"}
    bad = subprocess.run([sys.executable, "-m", "cli.main", "search", PHRASE, "-p", catalogue["project"],
                          "--metadata-filter", "team=dev"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr


def test_a_metadata_change_is_a_new_version_with_cached_vectors(api, stack, catalogue):
    key, beta = catalogue["key"], catalogue["ids"]["beta"]
    cache_rows = run(_count(stack.pg_dsn, "SELECT count(*) FROM embedding_cache"))
    same = httpx.put(f"{api.url}/v1/documents/{beta}/metadata", headers={"X-API-Key": key}, timeout=60,
                     json={"metadata": DOCS["beta"]})
    assert same.status_code == 202 and same.json()["queued"] is False, same.text
    new_meta = {**DOCS["beta"], "team": "ops", "reviewed": "2026-12-05"}
    r = httpx.put(f"{api.url}/v1/documents/{beta}/metadata", headers={"X-API-Key": key}, timeout=60,
                  json={"metadata": new_meta})
    assert r.status_code == 202, r.text
    assert r.json()["version"] == 2 and r.json()["queued"] is True
    body = wait_status(api.url, key, beta, {"COMPLETED", "FAILED"})
    assert (body["status"], body["version"], body["metadata"]) == ("COMPLETED", 2, new_meta)
    hits = search(api, key, query=PHRASE, k=100, metadata_filter={"team": "ops"}).json()["hits"]
    assert {(h["document_id"], h["version"]) for h in hits} == {(catalogue["ids"]["alpha"], 1), (beta, 2)}
    # same bytes, same texts: every vector of version 2 came from the cache
    assert run(_count(stack.pg_dsn, "SELECT count(*) FROM embedding_cache")) == cache_rows
    for bad, code in (({"metadata": {"a.b": 1}}, 422), ({"metadata": {}, "extra": 1}, 422)):
        assert httpx.put(f"{api.url}/v1/documents/{beta}/metadata", headers={"X-API-Key": key},
                         json=bad, timeout=60).status_code == code
    other = create_key("o" + uuid.uuid4().hex[:10])  # another project's key: not found
    assert httpx.put(f"{api.url}/v1/documents/{beta}/metadata", headers={"X-API-Key": other},
                     json={"metadata": {}}, timeout=60).status_code == 404


async def _count(dsn: str, sql: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


def test_a_collection_made_before_metadata_refuses_filters_and_takes_rows(api, stack):
    """The upgrade path: Milvus Lite cannot add a field to a collection, so rows lose
    their metadata there and a metadata filter is a 409 naming the reindex."""
    from adapters.collection_names import with_suffix
    from adapters.vector_store import (VectorStore, alias_name, chunk_row, create_chunk_collection)
    from schemas import EmbeddedChunk

    project = "old" + uuid.uuid4().hex[:8]
    store = VectorStore(stack.milvus_uri)
    try:
        alias = alias_name(project)
        physical = with_suffix(alias, "v1")
        create_chunk_collection(store.client, physical, with_metadata=False)
        store.client.create_alias(physical, alias)
        chunk = EmbeddedChunk(chunk_id=f"{project}.d:1:0", document_id=f"{project}.d", version=1, index=0,
                              total=1, project=project, category="default", filename="d.txt", text=PHRASE,
                              page_number=0, element_types=["NarrativeText"], vector=[0.05] * 384)
        assert store.upsert_sync(project, [chunk_row(chunk, {"team": "ops"})]) == 1
        assert store.count_sync(project, f"{project}.d", 1) == 1
        assert store.has_metadata_field_sync(project) is False
    finally:
        store.close()
    key = create_key(project)
    r = search(api, key, query=PHRASE, metadata_filter={"team": "ops"})
    assert r.status_code == 409 and "ragstream reindex" in r.text, r.text
    assert search(api, key, query=PHRASE).status_code == 200


def test_a_metadata_change_racing_a_delete_never_brings_the_document_back(api, catalogue, tmp_path):
    """PUT metadata and DELETE sent at once: the delete always wins (a newcomer's
    finding, 2026-12-05: 2 of 6 documents came back COMPLETED v2).  The registry's
    per-document lock orders them: a PUT first makes v2, which the delete then
    covers; a delete first makes the PUT a 404."""
    from concurrent.futures import ThreadPoolExecutor

    key = catalogue["key"]
    ids = []
    for n in range(6):
        path = tmp_path / f"race{n}.txt"
        path.write_text(f"Race {n}. {PHRASE}\n")
        r = upload(api.url, key, path, metadata=json.dumps({"team": "before"}))
        assert r.status_code == 202, r.text
        ids.append(r.json()["document_id"])
    for doc in ids:
        assert wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})["status"] == "COMPLETED"
    headers = {"X-API-Key": key}
    with ThreadPoolExecutor(2 * len(ids)) as pool:
        puts = [pool.submit(httpx.put, f"{api.url}/v1/documents/{d}/metadata", headers=headers,
                            json={"metadata": {"team": "racemeta"}}, timeout=60) for d in ids]
        deletes = [pool.submit(httpx.delete, f"{api.url}/v1/documents/{d}", headers=headers, timeout=60)
                   for d in ids]
        assert all(f.result().status_code in (202, 404) for f in puts)
        assert all(f.result().status_code == 202 for f in deletes)
    for doc in ids:
        assert wait_status(api.url, key, doc, {"DELETED"}, timeout_s=120)["status"] == "DELETED"
    time.sleep(3)  # a version registered by a racing PUT would complete about now
    for doc in ids:
        body = httpx.get(f"{api.url}/v1/documents/{doc}", headers=headers, timeout=30).json()
        assert body["status"] == "DELETED", body
    hits = search(api, key, query=PHRASE, k=100, metadata_filter={"team": "racemeta"}).json()["hits"]
    assert hits == []


def test_a_lone_surrogate_is_a_422_not_a_500(api, catalogue):
    body = '{"query": "pump", "metadata_filter": {"team": "\\ud800"}}'
    r = httpx.post(f"{api.url}/v1/search", content=body, timeout=60,
                   headers={"X-API-Key": catalogue["key"], "content-type": "application/json"})
    assert r.status_code == 422, r.text
    doc = catalogue["ids"]["alpha"]
    r = httpx.put(f"{api.url}/v1/documents/{doc}/metadata", content='{"metadata": {"team": "\\udfff"}}',
                  timeout=60, headers={"X-API-Key": catalogue["key"], "content-type": "application/json"})
    assert r.status_code == 422, r.text
