"""Against the real local tritonserver (nvidia-pytriton's, in .venv-triton).

Starts one server on free ports for the module; needs ``triton/setup_server_env.sh``
to have run (the fixture runs it when the venv is missing, which needs PyPI).
"""
from __future__ import annotations

import asyncio
import os
import time

import numpy as np
import pytest

from adapters.embedder import OnnxEmbedder
from adapters.triton_embedder import TritonEmbedder, TritonEmbedderError
from streams.settings import Settings
from devstack.triton import TritonServer, _group_pids

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Invoices are due within thirty days of receipt.",
    "",
    "Ünïcödé — text with punctuation!?",
    "retrieval augmented generation splits documents into chunks " * 40,  # > 256 tokens
]


def _free_ports(n: int) -> list[int]:
    """``n`` consecutive free ports of this process's range (devstack/ports.py), not
    ephemeral ones: an outgoing connection could take one before Triton binds it."""
    from devstack.ports import free_port_block

    base = free_port_block(n)
    return list(range(base, base + n))


def _settings(tmp_path, **kw) -> Settings:
    http, grpc, metrics = _free_ports(3)
    return Settings(triton_http_port=http, triton_grpc_port=grpc, triton_metrics_port=metrics,
                    data_dir=tmp_path, triton_threads=1, triton_models="embedder,embedder_online",
                    **kw)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = TritonServer(_settings(tmp_path_factory.mktemp("triton")))
    srv.start(timeout_s=180)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def reference():
    async def run():
        emb = OnnxEmbedder(intra_op_threads=1)
        try:
            return await emb.embed(TEXTS)
        finally:
            await emb.close()

    return asyncio.run(run())


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


async def test_grpc_matches_onnx(server, reference):
    for model in ("embedder", "embedder_online"):
        emb = TritonEmbedder(server.grpc_url, model, timeout_s=60)
        try:
            got = await emb.embed(TEXTS)
        finally:
            await emb.close()
        assert got.shape == reference.shape and got.dtype == np.float32
        assert _cos(got, reference).min() >= 0.999
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_http_matches_onnx(server, reference):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        inp = httpclient.InferInput("TEXT", [len(TEXTS), 1], "BYTES")
        inp.set_data_from_numpy(np.array([[t.encode()] for t in TEXTS], dtype=np.object_))
        got = client.infer("embedder", [inp]).as_numpy("EMBEDDING")
    finally:
        client.close()
    assert _cos(got, reference).min() >= 0.999


async def test_splits_above_max_batch(server):
    emb = TritonEmbedder(server.grpc_url, "embedder_online", timeout_s=60)  # max batch 32
    try:
        texts = [f"chunk {i} of a document" for i in range(70)]
        got = await emb.embed(texts)
        assert emb.max_batch == 32 and got.shape == (70, 384)
        np.testing.assert_allclose(got[40], (await emb.embed([texts[40]]))[0], atol=1e-5)
        assert (await emb.embed([])).shape == (0, 384)
    finally:
        await emb.close()


async def test_unavailable_gives_up_after_retry_window(tmp_path):
    port = _free_ports(1)[0]  # nothing listens here
    emb = TritonEmbedder(f"127.0.0.1:{port}", timeout_s=2, retry_s=1.0, max_batch=8)
    t0 = time.monotonic()
    with pytest.raises(TritonEmbedderError) as info:
        await emb.embed(["x"])
    await emb.close()
    assert info.value.status == "StatusCode.UNAVAILABLE"
    assert 0.9 <= time.monotonic() - t0 < 10


async def test_retries_until_server_is_back_and_no_orphans(tmp_path):
    """Server down when the request starts; it comes up 3 s later: the call succeeds.
    After stop(), no process of the server's group (tritonserver or stub) is left."""
    settings = _settings(tmp_path)
    srv = TritonServer(settings)
    emb = TritonEmbedder(srv.grpc_url, "embedder_online", timeout_s=30, retry_s=120, max_batch=32)
    loop = asyncio.get_running_loop()

    async def start_later():
        await asyncio.sleep(3)
        await loop.run_in_executor(None, srv.start)

    starter = asyncio.create_task(start_later())
    try:
        got = await emb.embed(["the server was down when this request started"])
        assert got.shape == (1, 384)
        await starter
        pid = srv.pid
        assert pid and _group_pids(pid)  # tritonserver + 1 stub
        stubs = [p for p in _group_pids(pid) if p != pid]
        assert stubs, "expected a Python backend stub process"
    finally:
        await emb.close()
        await starter
        await loop.run_in_executor(None, srv.stop)
    assert _group_pids(pid) == []
    for p in [pid, *stubs]:
        assert not os.path.exists(f"/proc/{p}") or open(f"/proc/{p}/stat").read().split()[2] == "Z"
