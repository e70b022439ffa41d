"""Reranker through the real tritonserver (tiny random cross-encoder built locally),
and the RRF fallback with the server stopped."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from adapters.reranker import TritonReranker, rerank, rrf
from streams.settings import Settings
from devstack.triton import TritonServer
from test_triton import _free_ports  # tests/ is on sys.path (rootdir-relative import mode)

ROOT = Path(__file__).resolve().parents[1]
DOCS = {"a": "Kafka consumer lag drives autoscaling.", "b": "Milvus stores vectors.",
        "c": "Triton batches inference requests.", "d": "PostgreSQL keeps document status."}
RANKINGS = [["a", "b", "c"], ["c", "d", "a"]]


@pytest.fixture(scope="module")
def reranker_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reranker")
    proc = subprocess.run([sys.executable, str(ROOT / "triton" / "export_reranker.py"),
                           "--tiny-random", "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_rrf_formula():
    fused = dict(rrf(RANKINGS))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert fused["d"] == pytest.approx(1 / 62)
    assert [i for i, _ in rrf(RANKINGS)][:2] == ["a", "c"]


async def test_reranks_through_triton_then_falls_back(reranker_dir, tmp_path):
    http, grpc, metrics = _free_ports(3)
    settings = Settings(triton_http_port=http, triton_grpc_port=grpc, triton_metrics_port=metrics,
                        data_dir=tmp_path, triton_threads=1, triton_models="reranker",
                        reranker_dir=reranker_dir)
    srv = TritonServer(settings).start(timeout_s=120)
    rr = TritonReranker(f"127.0.0.1:{grpc}", timeout_s=settings.reranker_timeout_s, failure_threshold=2,
                        reset_timeout_s=30, circuit=f"test-reranker-{grpc}")
    try:
        scores = await rr.score("what scales the workers?", list(DOCS.values()))
        assert scores.shape == (4,) and scores.dtype == np.float32 and np.isfinite(scores).all()
        again = await rr.score("what scales the workers?", list(DOCS.values()))
        np.testing.assert_allclose(scores, again, rtol=1e-5)  # deterministic
        res = await rerank("what scales the workers?", RANKINGS, DOCS, rr)
        assert res.reranked and sorted(res.ids) == sorted(DOCS)
        assert res.scores == sorted(res.scores, reverse=True)
    finally:
        srv.stop()
    t0 = time.monotonic()
    res = await rerank("what scales the workers?", RANKINGS, DOCS, rr, deadline_s=2.0)
    assert not res.reranked and res.fallback_reason
    assert res.ids == [i for i, _ in rrf(RANKINGS)]
    assert time.monotonic() - t0 < 2.5
    await rerank("q", RANKINGS, DOCS, rr, deadline_s=2.0)  # second failure opens it
    assert await rr.breaker_state() == "open"
    res = await rerank("q", RANKINGS, DOCS, rr)
    assert not res.reranked and "circuit open" in res.fallback_reason and res.latency_s < 0.1
    await rr.close()
