"""Hybrid search (dense + BM25 in Milvus, fused by RRF) on the real test stack.

Chunks are written straight to Milvus (embedded in process with the same ONNX graph
the pipeline uses) and their versions marked COMPLETED in the ledger, so search
sees them as current without running the whole pipeline.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import run
from test_reranker import DOCS, RANKINGS, reranker_dir  # noqa: F401 - the fixture
from test_triton import _free_ports

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[1]

RARE = "318,285"
TARGET = ("The parish council minutes record that the allotment gardens will reopen after the "
          f"winter drainage works, reference {RARE}, and that volunteers are welcome on Saturdays.")
TOPICS = ["pump station energy use", "water treatment capacity", "pipe renewal budget",
          "reservoir storage level", "customer billing figures", "leakage per kilometre"]


def _distractors(n: int) -> list[str]:
    """Texts full of figures (close to a query like "318,285" for the dense model)
    that share no token with it."""
    out = []
    for i in range(n):
        a, b, c = 100 + 7 * i, 400 + 13 * i, 900 - 5 * i
        out.append(f"Table {i + 1}: {TOPICS[i % len(TOPICS)]} was {a},{b:03d} units in {2000 + i % 25}; "
                   f"the target for next year is {c},{(b * 3) % 1000:03d} units and {i + 11}%.")
    return out


async def _index(project: str, docs: list[dict], settings) -> None:
    """Embed and upsert ``docs`` (keys: document_id, text, page_number, category; one
    version each) and mark each document's version 1 COMPLETED in the ledger."""
    from adapters.embedder import OnnxEmbedder
    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head
    from adapters.vector_store import VectorStore

    emb = OnnxEmbedder(settings.embedder_onnx_path, max_tokens=settings.embedder_max_tokens)
    try:
        vecs = await emb.embed([d["text"] for d in docs])
    finally:
        await emb.close()
    rows = [{"chunk_id": f"{d['document_id']}:1:{i}", "vector": vecs[i].tolist(), "document_id": d["document_id"],
             "version": 1, "chunk_index": i, "page_number": d.get("page_number", 1),
             "element_types": "NarrativeText,Table", "filename": f"{d['document_id']}.pdf", "project": project,
             "category": d.get("category", "default"), "text": d["text"]} for i, d in enumerate(docs)]
    store = VectorStore(settings.milvus_uri)
    try:
        await store.upsert(project, rows)
    finally:
        store.close()
    await upgrade_head(settings.pg_dsn)
    async with Metadata(settings.pg_dsn) as md:
        for doc_id in sorted({d["document_id"] for d in docs}):
            await md.ledger.claim_outcome(document_id=doc_id, version=1, project=project,
                                          outcome="COMPLETED", chunks=1)


@pytest.fixture
def corpus(stack, project):
    """80 figure-laden distractors over 4 documents, pages 1-5, categories a/b, plus
    the TARGET chunk (document ``{project}-t``, page 3, category b)."""
    docs = [{"document_id": f"{project}-d{i % 4}", "text": t, "page_number": 1 + i % 5,
             "category": "a" if i % 2 else "b"} for i, t in enumerate(_distractors(80))]
    docs.append({"document_id": f"{project}-t", "text": TARGET, "page_number": 3, "category": "b"})
    run(_index(project, docs, stack))
    return project


def _ids(result) -> list[str]:
    return [h["document_id"] for h in result.hits]


def test_hybrid_finds_a_rare_token_dense_misses(stack, corpus):
    from search.query import search

    dense = run(search(RARE, project=corpus, k=20, settings=stack, mode="dense"))
    assert dense.rankers[0] == "dense" and "bm25" not in dense.rankers
    assert f"{corpus}-t" not in _ids(dense), "precondition: dense top 20 holds the target"
    hybrid = run(search(RARE, project=corpus, k=3, settings=stack))
    assert hybrid.rankers[:3] == ["dense", "bm25", "rrf"], hybrid.rankers
    assert f"{corpus}-t" in _ids(hybrid), [h["text"][:60] for h in hybrid.hits]
    hit = next(h for h in hybrid.hits if h["document_id"] == f"{corpus}-t")
    assert 0.0 < hit["score"] <= 2 / 61 and -1.0 <= hit["dense_score"] <= 1.0
    with pytest.raises(ValueError):
        run(search(RARE, project=corpus, k=3, settings=stack, mode="sparse"))


def test_filters_hold_for_both_rankers(stack, corpus):
    from search.query import SearchFilters, search

    for flt, ok in [(SearchFilters(category="a"), lambda h: h["category"] == "a"),
                    (SearchFilters(document_id=f"{corpus}-d2"), lambda h: h["document_id"] == f"{corpus}-d2"),
                    (SearchFilters(page_from=2, page_to=3), lambda h: 2 <= h["page_number"] <= 3)]:
        res = run(search(f"pump energy use {RARE}", project=corpus, k=10, settings=stack, filters=flt))
        assert res.hits and all(ok(h) for h in res.hits), (flt, [(h["category"], h["page_number"]) for h in res.hits])
    # the target (category b, page 3) is found through BM25 only where the filter lets it
    assert f"{corpus}-t" not in _ids(run(search(RARE, project=corpus, k=5, settings=stack,
                                                filters=SearchFilters(category="a"))))
    assert f"{corpus}-t" in _ids(run(search(RARE, project=corpus, k=5, settings=stack,
                                            filters=SearchFilters(category="b", page_from=3, page_to=3))))


def test_first_searches_of_a_new_project_race_safely(stack, project):
    """Concurrent first calls for a project with no collection yet — threads of one
    client (the API's shared VectorStore) and separate clients (other processes) —
    all succeed: creating the collection and its alias is race-safe (schemathesis
    found a 500: "alias ... already exists" from two concurrent POST /v1/search)."""
    from concurrent.futures import ThreadPoolExecutor

    from adapters.vector_store import DIM, VectorStore

    shared = VectorStore(stack.milvus_uri)
    others = [VectorStore(stack.milvus_uri) for _ in range(3)]
    vector = [1.0] + [0.0] * (DIM - 1)
    try:
        stores = [shared] * 5 + others
        with ThreadPoolExecutor(len(stores)) as pool:
            results = list(pool.map(lambda st: st.search_sync(project, vector, k=3), stores))
        assert results == [[]] * len(stores)
    finally:
        for st in [shared, *others]:
            st.close()


def test_old_schema_collection_falls_back_to_dense(stack, project):
    """A collection made before the BM25 field existed (the old schema, no analyzer,
    no sparse field) is still searched: dense only, and the result says why."""
    from pymilvus import DataType, MilvusClient

    from adapters.vector_store import DIM, TEXT_MAX, alias_name
    from search.query import search

    alias = alias_name(project)
    client = MilvusClient(uri=stack.milvus_uri, dedicated=True)
    try:
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=512)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
        for name in ("document_id", "element_types", "filename", "project", "category"):
            schema.add_field(name, DataType.VARCHAR, max_length=1024)
        for name in ("version", "chunk_index", "page_number"):
            schema.add_field(name, DataType.INT64)
        schema.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX)
        index = client.prepare_index_params()
        index.add_index(field_name="vector", index_type="FLAT", metric_type="IP")
        client.create_collection(f"{alias}_v1", schema=schema, index_params=index)
        client.create_alias(f"{alias}_v1", alias)
    finally:
        client.close()
    run(_index(project, [{"document_id": f"{project}-o", "text": TARGET}], stack))
    res = run(search(RARE, project=project, k=3, settings=stack))
    assert res.rankers[:1] == ["dense"] and "bm25" not in res.rankers
    assert res.fallback_reason and "no BM25 field" in res.fallback_reason
    assert _ids(res) == [f"{project}-o"] and res.hits[0]["dense_score"] == res.hits[0]["score"]


def test_search_json_parses(stack, corpus):
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "ragstream"), "search", RARE, "-p", corpus, "-k", "3",
                           "--json", "--category", "b", "--page-from", "3", "--page-to", "3"],
                          capture_output=True, text=True, timeout=180, env=dict(os.environ), cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["query"] == RARE and out["project"] == corpus and out["k"] == 3
    assert out["rankers"][:3] == ["dense", "bm25", "rrf"] and out["reranked"] is False
    assert out["fallback_reason"]  # no cross-encoder weights on the test stack
    assert out["hits"] and out["hits"][0]["document_id"] == f"{corpus}-t"
    hit = out["hits"][0]
    assert {"document_id", "version", "filename", "page_number", "element_types", "text", "score",
            "dense_score"} <= set(hit)
    assert hit["element_types"] == ["NarrativeText", "Table"] and hit["page_number"] == 3


async def test_breaker_is_process_wide_and_closes_after_reset(reranker_dir, tmp_path):  # noqa: F811
    """Each request builds its own TritonReranker (as search does); failures of earlier
    requests still open the circuit, later requests fall back at once without calling
    Triton, and after the reset timeout a call goes through and closes it."""
    from adapters.reranker import TritonReranker, rerank
    from devstack.triton import TritonServer
    from streams.settings import Settings

    http, grpc, metrics, dead = _free_ports(4)
    circuit = f"test-breaker-{grpc}"
    settings = Settings(triton_http_port=http, triton_grpc_port=grpc, triton_metrics_port=metrics,
                        data_dir=tmp_path, triton_threads=1, triton_models="reranker",
                        reranker_dir=reranker_dir)

    def request(port: int) -> TritonReranker:  # a new instance per request, one circuit
        return TritonReranker(f"127.0.0.1:{port}", timeout_s=2.0, failure_threshold=2,
                              reset_timeout_s=1.0, circuit=circuit)

    srv = TritonServer(settings).start(timeout_s=120)
    try:
        for _ in range(2):  # two requests against a reranker that is not there
            rr = request(dead)
            res = await rerank("q", RANKINGS, DOCS, rr, deadline_s=3.0)
            assert not res.reranked and "circuit open" not in res.fallback_reason
            await rr.close()
        assert await request(dead).breaker_state() == "open"
        rr = request(grpc)  # a healthy reranker, but the circuit is open: not called
        res = await rerank("q", RANKINGS, DOCS, rr)
        assert not res.reranked and "circuit open" in res.fallback_reason and res.latency_s < 0.1
        deadline = time.monotonic() + 5
        while await rr.breaker_state() == "open" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # poll: the reset timeout is 1 s
        assert await rr.breaker_state() == "half-open"
        res = await rerank("q", RANKINGS, DOCS, rr)
        assert res.reranked, res.fallback_reason
        assert await rr.breaker_state() == "closed"
        await rr.close()
    finally:
        srv.stop()



def test_bench_search_prints_both_latencies(stack):
    """``ragstream bench search`` at a small scale (the 100 000 case is too slow here)."""
    import io

    from rich.console import Console

    from bench.search import bench_search

    out = io.StringIO()
    hybrid, dense = bench_search(2000, Console(file=out, width=200), queries=5)
    assert len(hybrid.ms) == len(dense.ms) == 5 and min(hybrid.ms + dense.ms) > 0
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("hybrid_p95_ms=") and " dense_p95_ms=" in last and " ratio=" in last, last


def test_rrf_ties_are_broken_by_the_two_scores():
    """Chunks ranked (1, 2) and (2, 1) tie on RRF; the one with the higher cosine +
    normalised BM25 comes first, whichever ranking it leads."""
    from adapters.vector_store import rrf_fuse

    dense = [{"chunk_id": "a", "dense_score": 0.50}, {"chunk_id": "b", "dense_score": 0.49},
             {"chunk_id": "c", "dense_score": 0.30}]
    bm25 = [{"chunk_id": "b", "dense_score": 0.49, "bm25_score": 12.0},
            {"chunk_id": "a", "dense_score": 0.50, "bm25_score": 6.0},
            {"chunk_id": "d", "dense_score": 0.10, "bm25_score": 5.0}]
    fused = rrf_fuse(dense, bm25, rrf_k=60)
    # c (dense 3rd) and d (BM25 3rd) tie too: d's 0.10 + 5/12 beats c's 0.30
    assert [h["chunk_id"] for h in fused] == ["b", "a", "d", "c"]
    assert fused[0]["score"] == fused[1]["score"] == 1 / 61 + 1 / 62
    assert fused[0]["bm25_score"] == 12.0 and "bm25_score" not in fused[3]
    # each ranking's only hit: 0.30 + 1/1 (BM25's best) beats 0.50 + 0; no BM25 hits is fine
    assert [h["chunk_id"] for h in rrf_fuse(dense[:1], [{**dense[2], "bm25_score": 1.0}])] == ["c", "a"]
    assert [h["chunk_id"] for h in rrf_fuse(dense, [])] == ["a", "b", "c"]


CJK_TARGET = "歌山镇农贸市场总用地面积4076.54平方米，市场内各类摊位52个，由乙方统一经营管理。"
CJK_OTHERS = ["本项目预算金额为七十万元，采用竞争性谈判方式确定成交供应商。",
              "谈判响应文件从开标之日起有效期为六十天，逾期视为无效。",
              "履约保证金为中标价的百分之五，合同期满后无息退还。"]


def test_cjk_sub_word_is_found_by_bm25(stack, project):
    """A Chinese question shares words, not whole unspaced runs, with its answer:
    BM25 matches through the lexical form (CJK characters + bigrams,
    search/lexical.py), and a CJK query is ranked by BM25 first (the English
    embedder's ranking of it is noise).  Before, the standard analyzer made each
    unspaced run one token and "摊位" matched nothing."""
    from search.query import search

    docs = [{"document_id": f"{project}-c{i}", "text": t} for i, t in enumerate(CJK_OTHERS)]
    docs.append({"document_id": f"{project}-stalls", "text": CJK_TARGET})
    docs += [{"document_id": f"{project}-en{i}", "text": t} for i, t in enumerate(_distractors(12))]
    run(_index(project, docs, stack))
    res = run(search("农贸市场内共有多少个摊位？", project=project, k=3, settings=stack))
    assert res.rankers[:3] == ["dense", "bm25", "rrf"], res.rankers
    assert _ids(res)[0] == f"{project}-stalls", [h["text"][:30] for h in res.hits]
    assert "bm25_score" in res.hits[0]


def test_collection_with_bm25_on_raw_text_still_searches(stack, project):
    """A collection made before the ``lexical`` field (BM25 fed from ``text``) keeps
    working: rows are written without the field and the raw query goes to BM25."""
    from pymilvus import MilvusClient

    from adapters.vector_store import alias_name, create_chunk_collection
    from search.query import search

    alias = alias_name(project)
    client = MilvusClient(uri=stack.milvus_uri, dedicated=True)
    try:
        create_chunk_collection(client, f"{alias}_v1", with_lexical=False)
        client.create_alias(f"{alias}_v1", alias)
    finally:
        client.close()
    run(_index(project, [{"document_id": f"{project}-t", "text": TARGET}]
               + [{"document_id": f"{project}-d", "text": t} for t in _distractors(20)], stack))
    res = run(search(RARE, project=project, k=3, settings=stack))
    assert res.rankers[:3] == ["dense", "bm25", "rrf"] and f"{project}-t" in _ids(res), res.rankers


def test_late_interaction_reorders_the_fused_head_when_asked(stack, corpus):
    from search.query import search

    late = stack.model_copy(update={"second_stage": "late-interaction", "late_interaction_depth": 5})
    res = run(search(f"allotment gardens reopen {RARE}", project=corpus, k=10, settings=late))
    assert res.rankers == ["dense", "bm25", "rrf", "late-interaction"], (res.rankers, res.fallback_reason)
    assert all(h["embed_text"] == h["text"] for h in res.hits)  # rows written without one: the text
    assert [("late_score" in h) for h in res.hits] == [True] * 5 + [False] * 5
    assert res.hits[0]["document_id"] == f"{corpus}-t"
    cjk = run(search("农贸市场招标编号", project=corpus, k=3, settings=late))
    assert "late-interaction" not in cjk.rankers and "CJK query" in cjk.fallback_reason
