"""In-process ONNX embedder vs the torch all-MiniLM-L6-v2 it was exported from.

The torch reference runs in a subprocess (``triton/export_embedder.py`` functions),
so this test process never imports torch/transformers.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adapters.embedder import (
    DEFAULT_ONNX_PATH,
    DIM,
    EXPORT_SCRIPT,
    Embedder,
    OnnxEmbedder,
    create_embedder,
    load_tokenizer,
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Invoices are due within thirty days of receipt.",
    "Kafka consumer lag drives the autoscaler.",
    "",
    "Ünïcödé text — with punctuation!?",
    "A much longer passage about retrieval augmented generation, chunking by title, "
    "and embedding batches across documents before indexing them into Milvus. " * 4,
]


def torch_reference(texts: list[str]) -> np.ndarray:
    """Embeddings from the torch model (sentence-transformers pooling), via a subprocess."""
    code = (
        "import json, runpy, sys\n"
        f"mod = runpy.run_path({str(EXPORT_SCRIPT)!r})\n"
        "texts = json.load(sys.stdin)\n"
        "print(json.dumps(mod['torch_embed'](texts).tolist()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts),
                          capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.asarray(json.loads(proc.stdout.strip().splitlines()[-1]), dtype=np.float32)


@pytest.fixture(scope="module")
def onnx_path() -> Path:
    if not DEFAULT_ONNX_PATH.is_file():
        from adapters.embedder import export_onnx

        export_onnx(DEFAULT_ONNX_PATH)
    return DEFAULT_ONNX_PATH


@pytest.fixture
async def embedder(onnx_path):
    emb = OnnxEmbedder(onnx_path, intra_op_threads=1, batch_size=4)
    yield emb
    await emb.close()


async def test_matches_torch(embedder):
    got = await embedder.embed(SENTENCES)
    ref = torch_reference(SENTENCES)
    assert got.shape == ref.shape == (len(SENTENCES), DIM)
    cos = (got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
    assert cos.min() >= 0.999, cos


async def test_normalised_and_order_preserved(embedder):
    assert isinstance(embedder, Embedder)
    texts = SENTENCES[::-1]
    vecs = await embedder.embed(texts)
    assert vecs.dtype == np.float32 and vecs.shape == (len(texts), DIM)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # per-row result independent of batch composition / padding
    singles = np.vstack([await embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(vecs, singles, atol=1e-5)


async def test_empty_input(embedder):
    out = await embedder.embed([])
    assert out.shape == (0, DIM) and out.dtype == np.float32
    with pytest.raises(TypeError):
        await embedder.embed("not a list")
    with pytest.raises(TypeError):
        await embedder.embed(["ok", 3])


async def test_long_batch_truncates_to_256(onnx_path):
    tok = load_tokenizer(pad=False)
    base = "retrieval augmented generation splits documents into chunks "  # ~9 tokens
    texts = [f"document {i}: " + base * 60 for i in range(300)]  # ~550 tokens each
    assert all(len(e.ids) == 256 for e in tok.encode_batch(texts[:5]))
    # truncation: text beyond token 256 does not change the vector
    emb = OnnxEmbedder(onnx_path, batch_size=32)
    try:
        vecs = await emb.embed(texts)
        assert vecs.shape == (300, DIM)
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        longer = await emb.embed([texts[0] + " completely different trailing words" * 50])
        np.testing.assert_allclose(longer[0], vecs[0], atol=1e-6)
    finally:
        await emb.close()


async def test_create_embedder_onnx(onnx_path):
    from streams.settings import Settings

    emb = create_embedder(Settings(embedder="onnx", embedder_threads=1))
    try:
        assert isinstance(emb, OnnxEmbedder) and emb.dim == DIM
        assert (await emb.embed(["hello"])).shape == (1, DIM)
    finally:
        await emb.close()
    with pytest.raises(ValueError):
        create_embedder(Settings(embedder="nope"))
