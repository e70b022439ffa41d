"""The int8 variant of the embedding model (``RAGSTREAM_EMBEDDER_PRECISION=int8``).

ONNX Runtime's dynamic quantization of the exported all-MiniLM-L6-v2 graph
(``triton/embedder/1/model.onnx``): the weights of its matrix products are stored as
int8 with one scale per output channel (per tensor lost too much: cosine to the
float vectors 0.94–0.98 on the test texts, against 0.990–0.995), activations are quantized per batch at run time, the
pooling and L2 normalisation stay float.  The file lies beside the float model as
``model.int8.onnx`` (gitignored, like the export) and is made from it on first use.

Its vectors are still float32 ``(n, 384)`` with unit L2 norm, close to the float
model's but not equal (cosine per text: see ``ragstream bench int8``), so it is a
model of its own for the embedding cache: the cache key hashes the file
(adapters/model_identity.py), and no vector of one precision is served for the other.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from adapters.embedding import EmbedderError

INT8_NAME = "model.int8.onnx"
_lock = threading.Lock()


def int8_path(float_model: Path) -> Path:
    """Where the int8 variant of the float model at ``float_model`` lives (same folder)."""
    return Path(float_model).with_name(INT8_NAME)


def is_stale(float_model: Path, int8_model: Path) -> bool:
    """True when ``int8_model`` is missing or older than ``float_model`` (a re-export,
    e.g. ``devstack.triton.ensure_models`` adding an output, must be quantized again)."""
    try:
        return int8_model.stat().st_mtime_ns < float_model.stat().st_mtime_ns
    except FileNotFoundError:
        return True


def quantize_int8(float_model: Path, out: Path | None = None) -> Path:
    """Write the int8 variant of ``float_model`` to ``out`` (default :func:`int8_path`)
    and return its path.  The file appears whole or not at all (written beside it,
    then renamed).  About 2 s and 23 MB for the 90 MB export (one core, 2026-12-07).

    Raises ``EmbedderError`` when the float model is missing or cannot be quantized."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    float_model = Path(float_model)
    out = Path(out) if out else int8_path(float_model)
    if not float_model.is_file():
        raise EmbedderError(f"cannot quantize {float_model}: no such file (export the model first)")
    with _lock:
        fd, tmp = tempfile.mkstemp(prefix=".int8-", suffix=".onnx", dir=out.parent)
        os.close(fd)
        try:
            quantize_dynamic(str(float_model), tmp, weight_type=QuantType.QInt8, per_channel=True)
            os.chmod(tmp, 0o644)  # like the export: readable by the Triton and test processes
            os.replace(tmp, out)
        except Exception as exc:  # onnxruntime / onnx raise their own types
            raise EmbedderError(f"cannot quantize {float_model}: {exc}") from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return out
