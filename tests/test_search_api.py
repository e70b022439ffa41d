"""``POST /v1/search`` against the real API, stack and worker: the project's own
sample documents are uploaded over HTTP (the PDF under category ``reports``), then
searched with and without filters; keys, project scope and body validation are
enforced like the other ``/v1`` routes."""
from __future__ import annotations

import httpx
import pytest

from api_helpers import create_key, upload, wait_status

pytestmark = pytest.mark.integration

HIT_FIELDS = {"document_id", "version", "filename", "page_number", "element_types", "text", "score",
              "dense_score", "metadata"}
QUERY = "energy use per megalitre West Hollow"


@pytest.fixture(scope="module")
def indexed(api, stack):
    """A project holding sample-report.pdf (category reports), .docx and .html, all
    COMPLETED: ``{"project", "key", "docs": {suffix: document_id}}``."""
    import uuid

    from stages.samples import generate_samples

    project = "s" + uuid.uuid4().hex[:10]
    key = create_key(project)
    pdf, docx, html = generate_samples(stack.data_dir / "search-api-samples")
    docs = {}
    for path, category in ((pdf, "reports"), (docx, "default"), (html, "default")):
        r = upload(api.url, key, path, category=category)
        assert r.status_code == 202, r.text
        docs[path.suffix] = r.json()["document_id"]
    for doc in docs.values():
        assert wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})["status"] == "COMPLETED"
    return {"project": project, "key": key, "docs": docs}


def search(api, key, **body) -> httpx.Response:
    headers = {"X-API-Key": key} if key is not None else {}
    return httpx.post(f"{api.url}/v1/search", json=body, headers=headers, timeout=120)


def test_search_answers_with_hits_of_the_keys_project(api, indexed):
    r = search(api, indexed["key"], query=QUERY, k=3)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"query", "project", "k", "rankers", "reranked", "fallback_reason", "hits",
                         "latency_ms"}
    assert (body["query"], body["project"], body["k"]) == (QUERY, indexed["project"], 3)
    assert body["rankers"] and body["rankers"][0] == "dense"
    assert body["reranked"] or body["fallback_reason"]
    assert body["latency_ms"] > 0
    assert 1 <= len(body["hits"]) <= 3
    for hit in body["hits"]:
        assert set(hit) == HIT_FIELDS
        assert hit["document_id"] in indexed["docs"].values()
        assert hit["version"] == 1 and hit["text"] and isinstance(hit["element_types"], list)
        assert isinstance(hit["score"], float) and isinstance(hit["dense_score"], float)
    assert any("West Hollow" in h["text"] for h in body["hits"])
    scores = [h["score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)
    # k defaults to 10
    assert search(api, indexed["key"], query=QUERY).json()["k"] == 10


def test_filters_narrow_the_hits(api, indexed):
    key, docs = indexed["key"], indexed["docs"]
    by_doc = search(api, key, query=QUERY, k=20, document_id=docs[".docx"]).json()["hits"]
    assert by_doc and {h["document_id"] for h in by_doc} == {docs[".docx"]}
    by_category = search(api, key, query=QUERY, k=20, category="reports").json()["hits"]
    assert by_category and {h["document_id"] for h in by_category} == {docs[".pdf"]}
    pages = search(api, key, query=QUERY, k=20, page_from=2, page_to=2).json()["hits"]
    assert pages and {h["page_number"] for h in pages} == {2}
    assert {h["document_id"] for h in pages} == {docs[".pdf"]}  # docx/html chunks have no pages
    assert search(api, key, query=QUERY, category="nosuchcategory").json()["hits"] == []


def test_keys_and_project_scope(api, indexed):
    assert search(api, None, query=QUERY).status_code == 401
    assert search(api, "rs_not-a-real-key", query=QUERY).status_code == 401
    other_project = "o" + indexed["project"][1:]
    other = create_key(other_project)
    r = search(api, other, query=QUERY, project=indexed["project"])
    assert r.status_code == 403, r.text
    # the other key sees its own (empty) project, never this one's chunks
    r = search(api, other, query=QUERY, k=50)
    assert r.status_code == 200 and r.json()["project"] == other_project
    assert not {h["document_id"] for h in r.json()["hits"]} & set(indexed["docs"].values())
    assert search(api, indexed["key"], query=QUERY, project=indexed["project"]).status_code == 200


@pytest.mark.parametrize("body", [
    {}, {"query": ""}, {"query": "   "}, {"query": QUERY, "k": 0}, {"query": QUERY, "k": 101},
    {"query": QUERY, "k": "many"}, {"query": QUERY, "page_from": 3, "page_to": 2},
    {"query": QUERY, "page_from": 0}, {"query": QUERY, "category": "no spaces!"},
    {"query": QUERY, "document_id": "../etc"}, {"query": QUERY, "unknown": 1}, ["query"],
])
def test_bad_bodies_are_422(api, indexed, body):
    r = httpx.post(f"{api.url}/v1/search", json=body, headers={"X-API-Key": indexed["key"]}, timeout=60)
    assert r.status_code == 422, (body, r.text)


def test_non_json_body_is_422(api, indexed):
    r = httpx.post(f"{api.url}/v1/search", content=b"query=x", timeout=60,
                   headers={"X-API-Key": indexed["key"], "Content-Type": "application/json"})
    assert r.status_code == 422
