"""Embedding through Triton over gRPC (``tritonclient.grpc.aio``).

The server-side model (``triton/embedder``) tokenises, so requests carry raw UTF-8
text: input ``TEXT`` BYTES ``(n, 1)``, output ``EMBEDDING`` FP32 ``(n, 384)``, each row
L2-normalised all-MiniLM-L6-v2 (truncated at 256 tokens).

Behaviour:

- one ``InferenceServerClient`` per instance, created lazily inside the running event
  loop on first use (a gRPC aio channel is bound to its loop; using the instance from
  another loop raises ``RuntimeError``);
- inputs larger than the model's ``max_batch_size`` (read once from the model config,
  256 for ``embedder``, 32 for ``embedder_online``) are split into several requests
  sent concurrently (at most ``concurrency`` in flight) so Triton's dynamic batcher
  can merge them;
- every request has a deadline (``timeout_s``); ``UNAVAILABLE`` (server down or
  restarting) is retried with exponential backoff and jitter (0.1 s doubling, + up to 0.2 s, to
  ``retry_max_wait_s``) for up to ``retry_s`` seconds, so a Triton restart stalls the
  embed stage instead of losing events;
- Prometheus metrics: ``ragstream_triton_requests_total{model,outcome}``,
  ``ragstream_triton_batch_size{model}`` (texts per request),
  ``ragstream_triton_latency_seconds{model}`` (per successful request, retries
  excluded), ``ragstream_triton_retries_total{model,status}``.
"""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Sequence

import numpy as np
from prometheus_client import Counter, Histogram
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from adapters.embedding import DIM, EmbedderError, check_texts
from adapters.model_identity import identity, triton_parts

if TYPE_CHECKING:  # pragma: no cover
    from streams.settings import Settings

BATCH_SIZE = Histogram(
    "ragstream_triton_batch_size", "Texts per Triton inference request", ["model"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
LATENCY = Histogram(
    "ragstream_triton_latency_seconds", "Triton inference request latency (successful attempt)",
    ["model"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
REQUESTS = Counter("ragstream_triton_requests_total", "Triton inference requests", ["model", "outcome"])
RETRIES = Counter("ragstream_triton_retries_total", "Retried Triton requests", ["model", "status"])

#: seconds a model identity (:meth:`TritonEmbedder.cache_identity`) is used before
#: the server is asked again (a model reloaded in place shows within this)
IDENTITY_TTL_S = 60.0

#: gRPC status codes (as tritonclient reports them) that mean "try again later"
RETRYABLE = frozenset({"StatusCode.UNAVAILABLE"})


class TritonEmbedderError(EmbedderError):
    """Triton returned an error, the deadline passed, or retries ran out.
    ``status`` is the gRPC status string (e.g. ``StatusCode.UNAVAILABLE``) or None."""

    def __init__(self, msg: str, status: str | None = None) -> None:
        super().__init__(msg)
        self.status = status


def _status(exc: BaseException) -> str | None:
    status = getattr(exc, "status", None)
    return status() if callable(status) else status


class TritonEmbedder:
    """:class:`adapters.embedder.Embedder` backed by a Triton server over gRPC.

    - ``url``: ``host:port`` of Triton's gRPC endpoint (settings: 127.0.0.1:18001).
    - ``model``: ``embedder`` (batch profile, max 256, ≤ 50 ms queueing) or
      ``embedder_online`` (max 32, ≤ 2 ms).
    - ``timeout_s``: deadline of one request in seconds (CPU: 256 texts of ~300
      tokens take tens of seconds on 2 cores, hence the 120 s default).
    - ``retry_s``: how long UNAVAILABLE is retried before giving up.
    - ``max_batch``: override the model's ``max_batch_size`` (else read from Triton).

    ``embed()`` raises ``TypeError`` for non-string items and
    :class:`TritonEmbedderError` on any other failure.
    """

    def __init__(
        self,
        url: str = "127.0.0.1:18001",
        model: str = "embedder",
        *,
        timeout_s: float = 120.0,
        retry_s: float = 60.0,
        retry_max_wait_s: float = 2.0,
        max_batch: int | None = None,
        concurrency: int = 4,
    ) -> None:
        self.dim = DIM
        self.url = url
        self.model = model
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.retry_max_wait_s = retry_max_wait_s
        self.max_batch = max_batch
        self.concurrency = concurrency
        self._client = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: asyncio.Semaphore | None = None
        self._identity: str | None = None
        self._identity_at = 0.0

    @classmethod
    def from_settings(cls, settings: "Settings") -> "TritonEmbedder":
        """From ``triton_grpc_port``, ``triton_embed_model``, ``triton_timeout_s``,
        ``triton_retry_s`` (see streams/settings.py)."""
        return cls(
            f"{settings.triton_host}:{settings.triton_grpc_port}",
            settings.triton_embed_model,
            timeout_s=settings.triton_timeout_s,
            retry_s=settings.triton_retry_s,
        )

    def _ensure_client(self):
        loop = asyncio.get_running_loop()
        if self._client is None:
            import tritonclient.grpc.aio as grpcclient

            self._client = grpcclient.InferenceServerClient(self.url)
            self._loop = loop
            self._sem = asyncio.Semaphore(self.concurrency)
        elif self._loop is not loop:
            raise RuntimeError("TritonEmbedder used from a different event loop than it was created in")
        return self._client

    def _retrying(self) -> AsyncRetrying:
        def retryable(exc: BaseException) -> bool:
            ok = _status(exc) in RETRYABLE
            if ok:
                RETRIES.labels(self.model, _status(exc)).inc()
                self._identity = None  # the server may come back with another model
            return ok

        return AsyncRetrying(
            retry=retry_if_exception(retryable),
            wait=wait_exponential_jitter(multiplier=0.1, max=self.retry_max_wait_s, jitter=0.2),
            stop=stop_after_delay(self.retry_s),
            reraise=True,
        )

    async def _max_batch(self) -> int:
        if self.max_batch is None:
            client = self._ensure_client()
            async for attempt in self._retrying():
                with attempt:
                    cfg = await client.get_model_config(self.model, as_json=True,
                                                        client_timeout=min(self.timeout_s, 10.0))
            self.max_batch = int(cfg["config"].get("max_batch_size", 0)) or 1 << 30
        return self.max_batch

    async def cache_identity(self) -> str:
        """The embedding cache's model key for this embedder: a 16-hex-character digest
        (adapters/model_identity.py) of the model's metadata and configuration as the
        server reports them — name, loaded version(s), backend, inputs, outputs, the
        parameters that change vectors (``max_tokens``: the tokenizer runs inside the
        server) and, for an ensemble, the same of every step's model.

        Asked of the server on the first call, again after :data:`IDENTITY_TTL_S`
        seconds and after any UNAVAILABLE (a restarted server may serve another
        model).  Cache rows written before this key existed (model
        ``all-MiniLM-L6-v2``) no longer match and are re-embedded once.  Raises
        :class:`TritonEmbedderError` when the server cannot answer (after the same
        retries as :meth:`embed`)."""
        if self._identity is None or time.monotonic() - self._identity_at > IDENTITY_TTL_S:
            try:
                parts = await self._model_parts(self.model, "", depth=0)
            except Exception as exc:
                status = _status(exc)
                raise TritonEmbedderError(f"Triton {self.model} at {self.url}: {status}: {exc}", status) from exc
            self._identity, self._identity_at = identity(parts), time.monotonic()
        return self._identity

    async def _model_parts(self, name: str, version: str, depth: int) -> dict:
        client = self._ensure_client()
        timeout = min(self.timeout_s, 10.0)
        async for attempt in self._retrying():
            with attempt:
                meta = await client.get_model_metadata(name, version, as_json=True, client_timeout=timeout)
                cfg = await client.get_model_config(name, version, as_json=True, client_timeout=timeout)
        parts = triton_parts(meta, cfg["config"])
        if depth < 4:  # an ensemble's steps (a step is rarely an ensemble itself)
            parts["steps"] = [await self._model_parts(step, "" if v == "-1" else v, depth + 1)
                              for step, v in parts["ensemble"]]
        return parts

    async def _infer(self, texts: list[str]) -> np.ndarray:
        import tritonclient.grpc.aio as grpcclient

        client = self._ensure_client()
        data = np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)
        BATCH_SIZE.labels(self.model).observe(len(texts))
        async with self._sem:
            async for attempt in self._retrying():
                with attempt:
                    inp = grpcclient.InferInput("TEXT", [len(texts), 1], "BYTES")
                    inp.set_data_from_numpy(data)
                    t0 = time.perf_counter()
                    result = await client.infer(
                        self.model, [inp],
                        outputs=[grpcclient.InferRequestedOutput("EMBEDDING")],
                        client_timeout=self.timeout_s)
                    LATENCY.labels(self.model).observe(time.perf_counter() - t0)
        out = result.as_numpy("EMBEDDING")
        if out is None or out.shape != (len(texts), self.dim):
            raise TritonEmbedderError(f"{self.model} returned shape {None if out is None else out.shape}")
        return out.astype(np.float32, copy=False)

    async def _infer_counted(self, texts: list[str]) -> np.ndarray:
        try:
            out = await self._infer(texts)
        except TritonEmbedderError:
            REQUESTS.labels(self.model, "error").inc()
            raise
        except Exception as exc:
            REQUESTS.labels(self.model, "error").inc()
            status = _status(exc)
            raise TritonEmbedderError(f"Triton {self.model} at {self.url}: {status}: {exc}", status) from exc
        REQUESTS.labels(self.model, "ok").inc()
        return out

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 ``(n, 384)``, unit rows, in input order; ``(0, 384)``
        for no texts.  See the class docstring for batching, deadlines and retries."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._ensure_client()
        try:
            size = await self._max_batch()
        except TritonEmbedderError:
            raise
        except Exception as exc:
            raise TritonEmbedderError(f"Triton {self.model} at {self.url}: {exc}", _status(exc)) from exc
        parts = [items[i:i + size] for i in range(0, len(items), size)]
        results = await asyncio.gather(*(self._infer_counted(p) for p in parts))
        return results[0] if len(results) == 1 else np.concatenate(results, axis=0)

    async def close(self) -> None:
        """Close the gRPC channel; idempotent."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()
