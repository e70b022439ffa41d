"""Which embedding model produced a vector: the embedding cache's model key.

The cache (adapters/embedding_cache.py) serves a stored vector for a text when the
key matches, so the key must change whenever the vectors would: other weights, another
tokenizer, another token limit (truncation), another pooling or normalisation.  Each
embedder's ``cache_identity()`` builds its key from what it actually loaded, through
:func:`identity`:

- ONNX Runtime in-process (adapters/embedder.py): the sha256 of the model file (mean
  pooling and L2 normalisation are nodes of the exported graph, so the hash covers
  them), the sha256 of the tokenizer file, and ``max_tokens``;
- Triton (adapters/triton_embedder.py): :func:`triton_parts` of the model's metadata
  and configuration as the server reports them — name, loaded version(s), backend,
  inputs and outputs, the parameters that change vectors (``max_tokens``…), and for
  an ensemble (the GPU layout: tokenizer model + ONNX model) each step's model name
  and version.

File hashes are kept per process by ``(path, mtime_ns, size, inode)``
(:func:`file_sha256`): the 90 MB all-MiniLM-L6-v2 export hashes in 0.1–0.4 s from
the page cache (2-core VM shared with other work, 2026-12-03; its ONNX Runtime
session takes about 1.2 s to load), once per process and file; a second embedder
of the same file costs 0.4 ms.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Mapping

#: hex characters of an identity: 64 bits, ample for the handful of models a
#: deployment ever runs (a collision would need ~4e9 of them)
IDENTITY_HEX = 16
#: Triton model parameters that tune speed only (texts per ONNX Runtime run, threads,
#: where the files are); any other parameter is taken to change the vectors
SPEED_ONLY_PARAMETERS = frozenset({"run_batch", "intra_op_threads", "inter_op_threads"})

_lock = threading.Lock()
_file_hashes: dict[tuple, str] = {}


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of the file at ``path``, read in 8 MiB blocks; computed once per
    process while the file's ``(resolved path, mtime_ns, size, inode)`` stays the
    same.  Raises ``OSError`` (e.g. ``FileNotFoundError``) when it cannot be read."""
    real = Path(path).resolve()
    st = real.stat()
    memo_key = (str(real), st.st_mtime_ns, st.st_size, st.st_ino)
    with _lock:
        if memo_key in _file_hashes:
            return _file_hashes[memo_key]
    digest = hashlib.sha256()
    with open(real, "rb") as fh:
        while block := fh.read(8 << 20):
            digest.update(block)
    with _lock:
        _file_hashes[memo_key] = digest.hexdigest()
    return _file_hashes[memo_key]


def identity(parts: Mapping[str, Any]) -> str:
    """A short hex digest (:data:`IDENTITY_HEX` characters) of ``parts``, a JSON-able
    mapping; equal parts give equal identities whatever the key order."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:IDENTITY_HEX]


def onnx_parts(model_path: str | os.PathLike[str], tokenizer_path: str | os.PathLike[str],
               max_tokens: int) -> dict[str, Any]:
    """What an in-process ONNX embedder's vectors depend on (see the module docstring).
    Raises ``OSError`` when either file cannot be read."""
    return {"backend": "onnxruntime", "model_sha256": file_sha256(model_path),
            "tokenizer_sha256": file_sha256(tokenizer_path), "max_tokens": int(max_tokens)}


def triton_parts(metadata: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """What a Triton model's vectors depend on, from ``get_model_metadata(as_json=True)``
    (``metadata``: name, versions, platform, inputs, outputs) and
    ``get_model_config(as_json=True)["config"]`` (``config``).  Speed-only parameters
    (:data:`SPEED_ONLY_PARAMETERS`), batching and instance settings are left out.

    Triton does not report a hash of the weights: weights replaced in place under the
    same version number are not seen (Triton's convention is a new version directory
    for new weights, which changes ``versions``)."""
    params = {k: v for k, v in (config.get("parameters") or {}).items()
              if k not in SPEED_ONLY_PARAMETERS}
    steps = (config.get("ensemble_scheduling") or {}).get("step") or []
    return {
        "backend": "triton",
        "name": metadata.get("name") or config.get("name"),
        "versions": sorted(str(v) for v in metadata.get("versions") or []),
        "platform": metadata.get("platform") or config.get("platform"),
        "server_backend": config.get("backend"),
        "inputs": metadata.get("inputs"),
        "outputs": metadata.get("outputs"),
        "parameters": params,
        "ensemble": [[s.get("model_name"), str(s.get("model_version", -1))] for s in steps],
    }
