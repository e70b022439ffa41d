"""The embedding cache is keyed by the model actually loaded (issue 23, failure 7).

It was keyed by the fixed name ``all-MiniLM-L6-v2``: a worker started with another
ONNX file, Triton model or token limit served the first model's vectors for every
text it had seen.  Shown here:

- no stack: :func:`adapters.model_identity.file_sha256` hashes a file once per
  ``(path, mtime, size)``; ONNX identities differ by weights and token limit and agree
  for the same file; Triton identities (from a stand-in server) differ by version,
  by a vector-changing parameter of the model or of an ensemble step, not by a
  speed-only one;
- the test stack's PostgreSQL: the embed stage's own function
  (agents.embed.embed_batch) run by a worker with the exported model, then one with
  a token limit of 16, then one with a copy of the model whose last LayerNorm bias is
  altered: each of the latter two embeds every text itself and sends its own
  vectors; the first model run again embeds nothing (all hits);
- the test stack's Triton: two clients of ``embedder`` agree, ``embedder_online``
  (another model name, another batch profile) differs.
"""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from adapters import model_identity
from adapters.embedder import DEFAULT_ONNX_PATH, OnnxEmbedder
from adapters.model_identity import file_sha256, identity, triton_parts
from adapters.triton_embedder import TritonEmbedder
from tests.conftest import run


@pytest.fixture(scope="module")
def onnx_path() -> Path:
    if not DEFAULT_ONNX_PATH.is_file():
        from adapters.embedder import export_onnx

        export_onnx(DEFAULT_ONNX_PATH)
    return DEFAULT_ONNX_PATH


@pytest.fixture(scope="module")
def altered_onnx(onnx_path, tmp_path_factory) -> Path:
    """The exported model with the last layer's output LayerNorm bias moved by +0.5
    on its first 64 of 384 values: same graph, other vectors."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(onnx_path))
    for init in model.graph.initializer:
        if init.name == "bert.encoder.layer.5.output.LayerNorm.bias":
            bias = numpy_helper.to_array(init).copy()
            bias[:64] += 0.5
            init.CopyFrom(numpy_helper.from_array(bias, init.name))
            break
    else:
        pytest.fail("no layer-5 output LayerNorm bias in the exported model")
    out = tmp_path_factory.mktemp("altered") / "model.onnx"
    onnx.save(model, str(out))
    return out


# ------------------------------------------------------------------------ no stack
def test_file_hash_is_computed_once_per_path_mtime_and_size(tmp_path, monkeypatch):
    reads = []
    real_open = open

    def counting_open(path, mode="r", *a, **kw):
        reads.append(path)
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr(model_identity, "open", counting_open, raising=False)
    path = tmp_path / "m.onnx"
    path.write_bytes(b"weights one")
    first = file_sha256(path)
    assert file_sha256(path) == first and len(reads) == 1
    path.write_bytes(b"weights two, longer")
    assert file_sha256(path) != first and len(reads) == 2


def test_onnx_identity_follows_weights_and_token_limit(onnx_path, altered_onnx):
    def ident(path, max_tokens=256):
        emb = OnnxEmbedder(path, max_tokens=max_tokens, intra_op_threads=1, export=False)
        try:
            return emb.cache_identity_sync()
        finally:
            run(emb.close())

    base = ident(onnx_path)
    assert len(base) == 16 and int(base, 16) >= 0
    assert ident(onnx_path) == base
    assert ident(onnx_path, max_tokens=128) != base
    assert ident(altered_onnx) not in (base, ident(onnx_path, max_tokens=128))


META = {"name": "embedder", "versions": ["1"], "platform": "python",
        "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": ["-1", "1"]}],
        "outputs": [{"name": "EMBEDDING", "datatype": "FP32", "shape": ["-1", "384"]}]}
CONFIG = {"name": "embedder", "backend": "python", "max_batch_size": 256,
          "parameters": {"max_tokens": {"string_value": "256"}, "run_batch": {"string_value": "32"}}}


def _with(base: dict, **changes) -> dict:
    out = dict(base)
    out.update(changes)
    return out


def test_triton_parts_follow_version_and_vector_parameters_only():
    base = identity(triton_parts(META, CONFIG))
    assert identity(triton_parts(_with(META, versions=["2"]), CONFIG)) != base
    shorter = {"max_tokens": {"string_value": "128"}, "run_batch": {"string_value": "32"}}
    assert identity(triton_parts(META, _with(CONFIG, parameters=shorter))) != base
    faster = {"max_tokens": {"string_value": "256"}, "run_batch": {"string_value": "8"}}
    assert identity(triton_parts(META, _with(CONFIG, parameters=faster, max_batch_size=32))) == base


class _Server:
    """Model metadata and config answers of a stand-in Triton (GPU ensemble layout)."""

    def __init__(self, tokenizer_tokens: str = "256"):
        ensemble = {"name": "embedder", "platform": "ensemble", "ensemble_scheduling": {"step": [
            {"model_name": "embedder_tokenizer", "model_version": "-1"},
            {"model_name": "embedder_onnx", "model_version": "-1"}]}}
        self.models = {
            "embedder": (_with(META, platform="ensemble"), ensemble),
            "embedder_tokenizer": ({"name": "embedder_tokenizer", "versions": ["1"]},
                                   {"backend": "python", "parameters": {
                                       "max_tokens": {"string_value": tokenizer_tokens}}}),
            "embedder_onnx": ({"name": "embedder_onnx", "versions": ["1"],
                               "platform": "onnxruntime_onnx"}, {"platform": "onnxruntime_onnx"}),
        }
        self.asked: list[tuple[str, str]] = []

    async def get_model_metadata(self, name, version="", as_json=False, client_timeout=None):
        self.asked.append((name, version))
        return self.models[name][0]

    async def get_model_config(self, name, version="", as_json=False, client_timeout=None):
        return {"config": self.models[name][1]}


def _triton_identity(server: _Server) -> str:
    async def ask():
        emb = TritonEmbedder("127.0.0.1:1", "embedder", retry_s=0.0)
        emb._client, emb._loop, emb._sem = server, asyncio.get_running_loop(), asyncio.Semaphore(1)
        first = await emb.cache_identity()
        assert await emb.cache_identity() == first  # kept: the server is asked once
        return first

    return run(ask())


def test_triton_ensemble_identity_includes_its_steps():
    server = _Server()
    base = _triton_identity(server)
    assert [name for name, _ in server.asked] == ["embedder", "embedder_tokenizer", "embedder_onnx"]
    assert _triton_identity(_Server()) == base
    assert _triton_identity(_Server(tokenizer_tokens="128")) != base


# ------------------------------------------------------------ the embed stage, PostgreSQL
class _Counting:
    """An embedder that counts the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.dim, self.embedded = inner, inner.dim, 0

    async def embed(self, texts):
        self.embedded += len(texts)
        return await self.inner.embed(texts)

    async def cache_identity(self):
        return await self.inner.cache_identity()


async def _run_embed_stage(embedder, pool, texts: list[str]) -> np.ndarray:
    """agents.embed.embed_batch over chunks of ``texts`` with a stand-in context
    (the real embedding cache); returns the vectors it sent, row i for texts[i]."""
    from adapters.embedding_cache import EmbeddingCache
    from agents.embed import embed_batch
    from schemas import Chunk

    sent = []

    async def send(key, value, partition=None):
        sent.append(value)

    async def partition_count(topic):
        return 4

    async def emit(*a, **kw):
        return None

    async def get_embedder():
        return embedder

    async def get_cache():
        return EmbeddingCache(pool)

    ctx = SimpleNamespace(emit=emit, topics=SimpleNamespace(embeddings=SimpleNamespace(send=send)),
                          resources=SimpleNamespace(embedder=get_embedder, embedding_cache=get_cache),
                          settings=SimpleNamespace(fair_small_document_chunks=64),
                          partition_count=partition_count)
    doc = "doc-" + uuid.uuid4().hex[:8]
    chunks = [Chunk(chunk_id=f"{doc}:1:{i}", document_id=doc, version=1, index=i, total=len(texts),
                    project="p", category="default", filename="f.txt", text=t, page_number=1,
                    element_types=["NarrativeText"]) for i, t in enumerate(texts)]
    await embed_batch(ctx, chunks)
    return np.asarray([c.vector for c in sent], dtype=np.float32)


@pytest.mark.integration
def test_embed_stage_does_not_serve_another_models_vectors(stack, onnx_path, altered_onnx):
    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head

    nonce = uuid.uuid4().hex
    texts = [f"Report {nonce} {i}: the Riverside pumping station used {1000 + i} kWh in March, "
             f"mostly for aeration, while the sludge digesters at the Northfield works produced "
             f"{200 + i} cubic metres of biogas per day during the cold spell." for i in range(4)]

    async def scenario():
        await upgrade_head(stack.pg_dsn)
        embedders = {name: _Counting(OnnxEmbedder(path, max_tokens=tokens, intra_op_threads=1))
                     for name, path, tokens in (("base", onnx_path, 256), ("short", onnx_path, 16),
                                                ("altered", altered_onnx, 256))}
        try:
            async with Metadata(stack.pg_dsn) as md:
                sent = {name: await _run_embed_stage(e, md.pool, texts) for name, e in embedders.items()}
                again = await _run_embed_stage(embedders["base"], md.pool, texts)
                direct = {name: await e.inner.embed(texts) for name, e in embedders.items()}
        finally:
            for e in embedders.values():
                await e.inner.close()
        return embedders, sent, again, direct

    embedders, sent, again, direct = run(scenario())
    for name in ("short", "altered"):
        assert embedders[name].embedded == len(texts), f"{name}: served from another model's rows"
        np.testing.assert_allclose(sent[name], direct[name], atol=1e-5)
        assert not np.allclose(sent[name], sent["base"], atol=1e-3), name
    assert embedders["base"].embedded == len(texts)  # its first run only: the second is all hits
    np.testing.assert_array_equal(again, sent["base"])


@pytest.mark.integration
def test_triton_models_have_their_own_identity(stack):
    async def identities():
        out = []
        for model in ("embedder", "embedder", "embedder_online"):
            emb = TritonEmbedder(f"{stack.triton_host}:{stack.triton_grpc_port}", model, retry_s=30.0)
            try:
                out.append(await emb.cache_identity())
            finally:
                await emb.close()
        return out

    one, two, online = run(identities())
    assert len(one) == 16 and one == two and online != one
