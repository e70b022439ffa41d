"""Reranking: Triton cross-encoder behind a circuit breaker, reciprocal rank fusion fallback.

:func:`rerank` takes the candidate rankings of a search (one ranked id list per
retriever, e.g. dense vectors and keywords) and the candidates' texts, and returns
one ordering.  With a healthy reranker it orders by the cross-encoder score of
(query, passage); when the breaker is open, the call fails or the deadline passes,
it orders by reciprocal rank fusion — score = Σ over rankings of 1 / (60 + rank),
rank counted from 1 (Cormack et al. 2009, k = 60) — and says so in the result
(``reranked=False`` with ``fallback_reason``).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from prometheus_client import Counter, Histogram

RRF_K = 60

RERANK_LATENCY = Histogram("ragstream_rerank_latency_seconds", "Reranker request latency",
                           buckets=(0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2, 5))
RERANK_FALLBACKS = Counter("ragstream_rerank_fallbacks_total", "Searches ordered by RRF instead",
                           ["reason"])

#: gRPC statuses that count as failures for the breaker (plus client-side timeouts)
TRIPPING = frozenset({"StatusCode.UNAVAILABLE", "StatusCode.RESOURCE_EXHAUSTED",
                      "StatusCode.DEADLINE_EXCEEDED"})


class CircuitOpen(RuntimeError):
    """The breaker is open: the reranker is not called until ``reset_timeout_s`` passes."""


class CircuitBreaker:
    """Closed → open after ``failure_threshold`` consecutive tripping failures; open →
    half-open after ``reset_timeout_s`` seconds, where one trial call is let through:
    success closes the breaker, failure opens it again.  Non-tripping errors (bad
    input, model errors) pass through without counting.  Time from
    ``time.monotonic`` (seconds)."""

    def __init__(self, failure_threshold: int = 3, reset_timeout_s: float = 10.0) -> None:
        self.failure_threshold = failure_threshold
        self.reset_timeout_s = reset_timeout_s
        self.failures = 0
        self.opened_at: float | None = None
        self._trial_in_flight = False

    @property
    def state(self) -> str:
        """"closed", "open" or "half-open"."""
        if self.opened_at is None:
            return "closed"
        if time.monotonic() - self.opened_at >= self.reset_timeout_s:
            return "half-open"
        return "open"

    def before_call(self) -> None:
        """Raise :class:`CircuitOpen` unless a call may go through now."""
        state = self.state
        if state == "open" or (state == "half-open" and self._trial_in_flight):
            raise CircuitOpen(f"reranker circuit open ({self.failures} failures)")
        if state == "half-open":
            self._trial_in_flight = True

    def record_success(self) -> None:
        self.failures, self.opened_at, self._trial_in_flight = 0, None, False

    def record_failure(self) -> None:
        self.failures += 1
        self._trial_in_flight = False
        if self.opened_at is not None or self.failures >= self.failure_threshold:
            self.opened_at = time.monotonic()


def _status(exc: BaseException) -> str | None:
    status = getattr(exc, "status", None)
    return status() if callable(status) else status


class TritonReranker:
    """Scores (query, passage) pairs with the Triton ``reranker`` model over gRPC.

    ``url``: Triton gRPC ``host:port``; ``timeout_s``: deadline per call (seconds);
    the breaker trips on timeouts, UNAVAILABLE and RESOURCE_EXHAUSTED.  The gRPC
    client is created lazily in the running loop.  ``score()`` raises
    :class:`CircuitOpen`, ``asyncio.TimeoutError`` or tritonclient's
    ``InferenceServerException``.
    """

    def __init__(self, url: str = "127.0.0.1:18001", model: str = "reranker", *,
                 timeout_s: float = 2.0, breaker: CircuitBreaker | None = None) -> None:
        self.url, self.model, self.timeout_s = url, model, timeout_s
        self.breaker = breaker or CircuitBreaker()
        self._client = None

    @classmethod
    def from_settings(cls, settings) -> "TritonReranker":
        """From ``triton_grpc_port``, ``reranker_model``, ``reranker_timeout_s``."""
        return cls(f"{settings.triton_host}:{settings.triton_grpc_port}", settings.reranker_model,
                   timeout_s=settings.reranker_timeout_s)

    async def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """float32 (n,) relevance logits, one per passage (higher = more relevant)."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        self.breaker.before_call()
        import tritonclient.grpc.aio as grpcclient

        if self._client is None:
            self._client = grpcclient.InferenceServerClient(self.url)
        n = len(passages)
        q = grpcclient.InferInput("QUERY", [n, 1], "BYTES")
        q.set_data_from_numpy(np.array([[query.encode()]] * n, dtype=np.object_))
        p = grpcclient.InferInput("PASSAGE", [n, 1], "BYTES")
        p.set_data_from_numpy(np.array([[t.encode()] for t in passages], dtype=np.object_))
        t0 = time.perf_counter()
        try:
            result = await asyncio.wait_for(
                self._client.infer(self.model, [q, p], client_timeout=self.timeout_s),
                self.timeout_s + 0.5)
        except asyncio.TimeoutError:
            self.breaker.record_failure()
            raise
        except Exception as exc:
            if _status(exc) in TRIPPING:
                self.breaker.record_failure()
            else:
                self.breaker._trial_in_flight = False
            raise
        self.breaker.record_success()
        RERANK_LATENCY.observe(time.perf_counter() - t0)
        return result.as_numpy("SCORE").reshape(-1).astype(np.float32)

    async def close(self) -> None:
        """Close the gRPC channel; idempotent."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()


@dataclass
class RerankResult:
    """``ids`` best first with their ``scores`` (cross-encoder logits when
    ``reranked``, else RRF scores); ``fallback_reason`` says why RRF was used."""

    ids: list[str]
    scores: list[float]
    reranked: bool
    fallback_reason: str | None = None
    latency_s: float = 0.0
    extra: dict = field(default_factory=dict)


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: ``[(id, Σ 1/(k + rank))]`` best first, rank from 1;
    ties keep first-seen order."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


async def rerank(query: str, rankings: Sequence[Sequence[str]], texts: Mapping[str, str],
                 reranker: TritonReranker | None, *, deadline_s: float | None = None,
                 top_k: int | None = None) -> RerankResult:
    """Order the union of ``rankings`` for ``query``: by the cross-encoder when
    ``reranker`` answers within ``deadline_s`` (default its ``timeout_s``), else by RRF.
    ``texts`` maps id → passage text.  Returns at most ``top_k`` ids (all by default).
    Never raises for reranker failures; they become ``fallback_reason``."""
    t0 = time.perf_counter()
    fused = rrf(rankings)
    ids = [i for i, _ in fused]
    reason = None
    if reranker is None:
        reason = "no reranker configured"
    else:
        try:
            scores = await asyncio.wait_for(reranker.score(query, [texts[i] for i in ids]),
                                            deadline_s or reranker.timeout_s + 1.0)
            order = np.argsort(-scores, kind="stable")
            out = [(ids[j], float(scores[j])) for j in order][:top_k]
            return RerankResult([i for i, _ in out], [s for _, s in out], True,
                                latency_s=time.perf_counter() - t0)
        except CircuitOpen as exc:
            reason = str(exc)
        except asyncio.TimeoutError:
            reason = "reranker deadline exceeded"
        except Exception as exc:  # noqa: BLE001 - any reranker failure falls back
            reason = f"reranker error: {_status(exc) or type(exc).__name__}"
    RERANK_FALLBACKS.labels(reason.split(":")[0][:40]).inc()
    fused = fused[:top_k]
    return RerankResult([i for i, _ in fused], [s for _, s in fused], False, reason,
                        latency_s=time.perf_counter() - t0)
