"""The int8 embedder (RAGSTREAM_EMBEDDER_PRECISION=int8): the real export quantized by
ONNX Runtime, its vectors against the float model's, its own cache key, and the
settings that choose it."""
from __future__ import annotations

import numpy as np
import pytest

from adapters.embedder import DEFAULT_ONNX_PATH, OnnxEmbedder, create_embedder
from adapters.embedding import EmbedderError
from adapters.int8_model import int8_path, is_stale, quantize_int8
from bench.int8 import PASSAGES, QUERIES
from streams.settings import Settings


@pytest.fixture(scope="module")
def embedders():
    fp32 = OnnxEmbedder(intra_op_threads=1)
    int8 = OnnxEmbedder(intra_op_threads=1, precision="int8")
    yield fp32, int8
    fp32._session = int8._session = None


def test_int8_vectors_are_unit_rows_close_to_the_float_model(embedders):
    fp32, int8 = embedders
    a, b = fp32.embed_sync(PASSAGES + QUERIES), int8.embed_sync(PASSAGES + QUERIES)
    assert b.dtype == np.float32 and b.shape == (16, 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-4)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.98, cos  # close, not equal: a model of its own
    assert cos.max() < 0.99999
    # the same passage wins each query with either model
    assert list((b[8:] @ b[:8].T).argmax(axis=1)) == list((a[8:] @ a[:8].T).argmax(axis=1)) == list(range(8))


def test_int8_model_is_smaller_and_has_its_own_cache_key(embedders):
    fp32, int8 = embedders
    assert int8.model_path == int8_path(DEFAULT_ONNX_PATH) and int8.model_path.name == "model.int8.onnx"
    assert int8.model_path.stat().st_size < 0.35 * DEFAULT_ONNX_PATH.stat().st_size
    assert int8.cache_identity_sync() != fp32.cache_identity_sync()


def test_settings_choose_the_precision():
    made = create_embedder(Settings(embedder="onnx", embedder_precision="int8"))
    assert isinstance(made, OnnxEmbedder) and made.model_path.name == "model.int8.onnx"
    with pytest.raises(ValueError, match="in-process embedder"):
        create_embedder(Settings(embedder="triton", embedder_precision="int8"))
    with pytest.raises(ValueError):
        Settings(embedder_precision="int4")
    with pytest.raises(ValueError, match="precision"):
        OnnxEmbedder(precision="fp16")


def test_quantizing_a_missing_model_names_it(tmp_path):
    with pytest.raises(EmbedderError, match="no such file"):
        quantize_int8(tmp_path / "model.onnx")
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_a_re_exported_float_model_is_quantized_again(tmp_path):
    """An int8 file older than its float model (a re-export) is made again on load."""
    import os
    import shutil

    float_model = shutil.copy(DEFAULT_ONNX_PATH, tmp_path / "model.onnx")
    first = quantize_int8(float_model)
    assert not is_stale(float_model, first)
    older = float_model.stat().st_mtime_ns - 10**10  # made 10 s before the float model
    os.utime(first, ns=(older, older))
    assert is_stale(float_model, first)
    OnnxEmbedder(float_model, precision="int8", export=False, intra_op_threads=1).embed_sync(["a text"])
    assert not is_stale(float_model, first)


def test_bench_int8_prints_its_summary_line_last():
    import re

    from bench.int8 import bench_int8

    lines: list[str] = []
    ratio = bench_int8(repeats=1, batches=(4,), tokens=(20,), threads=1, log=lines.append)
    assert ratio > 0 and len(lines) == 4  # machine, one case, real sentences, summary
    assert re.fullmatch(r"int8_vs_fp32=\d+\.\d{3} cos_min=0\.9\d{3} cos_mean=0\.9\d{3}", lines[-1]), lines


def test_queries_share_one_embedder_per_model():
    """search.query.embed_query keeps one in-process embedder per model (a new one per
    query cost ~160 ms of session load); the int8 one is another model."""
    import asyncio

    from adapters.embedder import shared_onnx_embedder
    from search.query import embed_query

    fp32 = Settings(embedder="onnx", embedder_threads=1)
    int8 = fp32.model_copy(update={"embedder_precision": "int8"})
    assert shared_onnx_embedder(fp32) is shared_onnx_embedder(fp32.model_copy())
    assert shared_onnx_embedder(int8) is not shared_onnx_embedder(fp32)
    assert shared_onnx_embedder(int8).model_path.name == "model.int8.onnx"
    vector, who = asyncio.run(embed_query("how can the contract be ended", int8))
    again, _ = asyncio.run(embed_query("how can the contract be ended", int8))  # a second loop
    assert who == "onnx" and vector.shape == (384,) and np.array_equal(vector, again)
