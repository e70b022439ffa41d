"""Reranking: Triton cross-encoder behind a circuit breaker, reciprocal rank fusion fallback.

:func:`rerank` takes the candidate rankings of a search (one ranked id list per
retriever, e.g. dense vectors and keywords) and the candidates' texts, and returns
one ordering.  With a healthy reranker it orders by the cross-encoder score of
(query, passage); when the breaker is open, the call fails or the deadline passes,
it orders by reciprocal rank fusion — score = Σ over rankings of 1 / (60 + rank),
rank counted from 1 (Cormack et al. 2009, k = 60) — and says so in the result
(``reranked=False`` with ``fallback_reason``).

The breaker is process-wide (purgatory's in-memory ``AsyncCircuitBreakerFactory``,
one circuit per Triton address and model): a search builds a new
:class:`TritonReranker` per request, and the failures of earlier requests still
count, so once the reranker has failed ``failure_threshold`` times in a row every
later request falls back at once, until ``reset_timeout_s`` has passed; then calls
go through again (half-open): a success closes the circuit, a failure opens it again.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from prometheus_client import Counter, Histogram
from purgatory import AsyncCircuitBreakerFactory
from purgatory.domain.model import OpenedState

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


def _status(exc: BaseException) -> str | None:
    status = getattr(exc, "status", None)
    return status() if callable(status) else status


def trips(exc: BaseException) -> bool:
    """True for failures that count against the breaker: a timeout, a cancelled call
    (the caller's deadline passed first), or gRPC UNAVAILABLE / RESOURCE_EXHAUSTED /
    DEADLINE_EXCEEDED.  Other errors (bad input, model errors) do not count."""
    return isinstance(exc, (asyncio.TimeoutError, asyncio.CancelledError)) or _status(exc) in TRIPPING


#: the process-wide breakers, one circuit per reranker endpoint (in memory)
BREAKERS = AsyncCircuitBreakerFactory(default_threshold=3, default_ttl=10.0,
                                      exclude=[(BaseException, lambda exc: not trips(exc))])


async def breaker_state(circuit: str) -> str:
    """``"closed"``, ``"open"`` or ``"half-open"`` (open, reset timeout passed: the
    next call goes through) of the process-wide circuit ``circuit``; "closed" for
    one never used."""
    async with BREAKERS.uow as uow:
        ctx = await uow.contexts.get(circuit)
    if ctx is None or ctx.state == "closed":
        return "closed"
    if ctx.state == "opened" and time.time() <= (ctx.opened_at or 0.0) + ctx.ttl:
        return "open"
    return "half-open"


class TritonReranker:
    """Scores (query, passage) pairs with the Triton ``reranker`` model over gRPC.

    ``url``: Triton gRPC ``host:port``; ``timeout_s``: deadline per call (seconds).
    Calls pass the process-wide breaker ``circuit`` (default ``"reranker:{url}/{model}"``,
    shared by every instance for that endpoint): it opens after ``failure_threshold``
    consecutive :func:`trips` failures and lets calls through again after
    ``reset_timeout_s`` seconds (both fixed by the first instance using that circuit).
    The gRPC client is created lazily in the running loop.  ``score()`` raises
    :class:`CircuitOpen`, ``asyncio.TimeoutError`` or tritonclient's
    ``InferenceServerException``.
    """

    def __init__(self, url: str = "127.0.0.1:18001", model: str = "reranker", *,
                 timeout_s: float = 2.0, failure_threshold: int = 3, reset_timeout_s: float = 10.0,
                 circuit: str | None = None) -> None:
        self.url, self.model, self.timeout_s = url, model, timeout_s
        self.failure_threshold, self.reset_timeout_s = failure_threshold, reset_timeout_s
        self.circuit = circuit or f"reranker:{url}/{model}"
        self._client = None

    async def breaker_state(self) -> str:
        """This endpoint's circuit: "closed", "open" or "half-open"."""
        return await breaker_state(self.circuit)

    @classmethod
    def from_settings(cls, settings) -> "TritonReranker":
        """From ``triton_grpc_port``, ``reranker_model``, ``reranker_timeout_s``."""
        return cls(f"{settings.triton_host}:{settings.triton_grpc_port}", settings.reranker_model,
                   timeout_s=settings.reranker_timeout_s)

    async def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """float32 (n,) relevance logits, one per passage (higher = more relevant)."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        import tritonclient.grpc.aio as grpcclient

        if self._client is None:
            self._client = grpcclient.InferenceServerClient(self.url)
        n = len(passages)
        q = grpcclient.InferInput("QUERY", [n, 1], "BYTES")
        q.set_data_from_numpy(np.array([[query.encode()]] * n, dtype=np.object_))
        p = grpcclient.InferInput("PASSAGE", [n, 1], "BYTES")
        p.set_data_from_numpy(np.array([[t.encode()] for t in passages], dtype=np.object_))
        breaker = await BREAKERS.get_breaker(self.circuit, self.failure_threshold, self.reset_timeout_s)
        t0 = time.perf_counter()
        try:
            async with breaker:
                result = await asyncio.wait_for(
                    self._client.infer(self.model, [q, p], client_timeout=self.timeout_s),
                    self.timeout_s + 0.5)
        except OpenedState as exc:
            raise CircuitOpen(f"reranker circuit open ({exc})") from None
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
