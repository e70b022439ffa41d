"""The dense index is a setting (``RAGSTREAM_MILVUS_INDEX_TYPE``): FLAT by default,
HNSW for a Milvus standalone or cluster (compose and Kubernetes set it), against a
real Milvus Lite server of this module's own (only the milvus service, a free port).

Milvus Lite 3.2 accepts and describes an HNSW index (measured 2026-12-05); what it
does with it inside is its own affair: these tests show the collection is made with
the configured index and its parameters, that searches pass an ``ef`` HNSW accepts
(never below k: Milvus refuses ef < k), and that search answers the same chunks.
"""
from __future__ import annotations

import math

import pytest
import yaml

from adapters.vector_store import DIM, HNSW_BUILD, VectorStore, _chunk_index_params, alias_name
from tests.conftest import ROOT, free_port_block


@pytest.fixture(scope="module")
def milvus(tmp_path_factory):
    """The URI of a Milvus Lite server of this module's own (stopped at the end)."""
    import devstack
    from streams.settings import Settings

    port = free_port_block(1)
    settings = Settings(data_dir=tmp_path_factory.mktemp("milvus-index"), milvus_uri=f"http://127.0.0.1:{port}")
    try:
        devstack.up(settings, names=["milvus"], timeout_s=120)
        yield settings.milvus_uri
    finally:
        devstack.down(settings, names=["milvus"])


def _unit(i: int) -> list[float]:
    v = [math.sin(i * 7 + j) for j in range(DIM)]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def _rows(project: str, n: int) -> list[dict]:
    return [{"chunk_id": f"{project}.d:1:{i}", "vector": _unit(i), "document_id": f"{project}.d", "version": 1,
             "chunk_index": i, "page_number": 1, "element_types": "NarrativeText", "filename": "d.txt",
             "project": project, "category": "default", "text": f"chunk number {i}", "metadata": None}
            for i in range(n)]


def _dense_index(store: VectorStore, project: str) -> dict:
    def describe(client):
        (name,) = client.list_indexes(alias_name(project), field_name="vector")
        return client.describe_index(alias_name(project), index_name=name)
    return store.run_sync("describe_index", describe)


@pytest.mark.parametrize("index_type", ["FLAT", "HNSW"])
def test_collections_get_the_configured_index_and_search_finds_the_same_chunks(milvus, index_type):
    project = f"idx{index_type.lower()}"
    store = VectorStore(milvus, reconnect_s=0)
    store.index_type = index_type
    try:
        store.upsert_sync(project, _rows(project, 40))
        index = _dense_index(store, project)
        # (Milvus Lite 3.2 describes the type and metric, not the build parameters:
        # those are checked where they are made, below)
        assert index["index_type"] == index_type and index["metric_type"] == "IP"
        alias = alias_name(project)
        params = store.dense_search_params(alias, 5)
        assert params == ({"metric_type": "IP", "params": {"ef": store.hnsw_ef}} if index_type == "HNSW" else {})
        if index_type == "HNSW":  # ef never below k
            assert store.dense_search_params(alias, store.hnsw_ef + 50)["params"]["ef"] == store.hnsw_ef + 50
        for i in (0, 17, 39):
            hits = store.search_sync(project, _unit(i), k=3)
            assert hits[0]["chunk_id"] == f"{project}.d:1:{i}" and hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
        # a k above the default ef is answered in full (Milvus refuses ef < k)
        assert len(store.search_sync(project, _unit(3), k=store.hnsw_ef + 10)) == 40
    finally:
        store.close()


class _Client:
    """prepare_index_params is a plain constructor in pymilvus (no server call)."""

    from pymilvus.milvus_client.index import IndexParams as prepare_index_params


def test_the_index_parameters_sent_for_each_type_and_an_unknown_type_refused():
    (hnsw,) = list(_chunk_index_params(_Client(), "vector", "HNSW"))
    assert hnsw.to_dict() == {"field_name": "vector", "index_type": "HNSW", "index_name": "", "metric_type": "IP",
                              **HNSW_BUILD}
    (flat,) = list(_chunk_index_params(_Client(), "vector", "FLAT"))
    assert flat.index_type == "FLAT" and set(flat.to_dict()) == {"field_name", "index_type", "index_name",
                                                                 "metric_type"}
    with pytest.raises(ValueError, match="IVF_PQ"):
        _chunk_index_params(_Client(), "vector", "IVF_PQ")


def test_deployments_use_hnsw_and_no_forced_flushes_the_embedded_default_flat():
    from streams.settings import Settings

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["index"]["environment"]
    k8s = next(d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "config.yaml").read_text())
               if d["kind"] == "ConfigMap")["data"]
    for env in (compose, k8s):
        assert env["RAGSTREAM_MILVUS_INDEX_TYPE"] == "HNSW"
        assert float(env["RAGSTREAM_INDEX_FLUSH_INTERVAL_S"]) < 0  # agents/index.TrailingFlush: never
    default = {name: f.default for name, f in Settings.model_fields.items()}
    assert default["milvus_index_type"] == "FLAT" and default["index_flush_interval_s"] > 0
    assert default["milvus_search_consistency"] == "Strong"
