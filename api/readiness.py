"""``/readyz``: is every dependency answering?  Unauthenticated, so cheap by design.

The checks use the API process's own long-lived clients (``ApiState``): the Kafka
producer's client asks the broker for metadata over its open connection, the
VectorStore's Milvus connection lists collections, the PostgreSQL pool and the S3
client run one request each.  No check opens a connection of its own, except Triton's
(one short HTTP request; only when Triton is the embedder).

:class:`ReadinessCache` answers from the last result for ``READY_CACHE_S`` seconds and
lets concurrent requests share one run, so a flood of probes costs at most one round
of checks per ``READY_CACHE_S`` whatever the request rate.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Optional

import httpx

from api.state import ApiState

CHECK_TIMEOUT_S = 5.0  # each check's limit; /readyz answers within about this
READY_CACHE_S = 2.0  # how long one round of checks answers /readyz


async def _timed(coro) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        detail = await asyncio.wait_for(coro, CHECK_TIMEOUT_S)
        return {"ok": True, "ms": round((time.perf_counter() - start) * 1000, 1),
                **({"detail": detail} if detail else {})}
    except Exception as exc:  # noqa: BLE001 — report every failure as a failed check
        return {"ok": False, "ms": round((time.perf_counter() - start) * 1000, 1),
                "error": f"{type(exc).__name__}: {exc}"[:300]}


async def readiness(state: ApiState) -> dict[str, dict[str, Any]]:
    """Run every dependency check concurrently (each limited to ``CHECK_TIMEOUT_S``
    seconds); ``{name: {"ok", "ms", "error"?}}`` for broker, database, object_store,
    milvus, and triton when it is the embedder."""
    s = state.settings

    async def broker() -> None:
        await state.producer.client.fetch_all_metadata()  # the producer's open connection

    async def database() -> None:
        await state.metadata.pool.fetchval("SELECT 1")

    async def object_store() -> None:
        await state.store.client.head_bucket(Bucket=state.store.bucket)

    async def milvus() -> None:
        # the API's own connection (no reconnect loop here: a failure is the answer;
        # the next search reconnects through VectorStore's retries)
        await asyncio.to_thread(lambda: state.vectors.client.list_collections(timeout=4.0))

    async def triton() -> None:
        async with httpx.AsyncClient(timeout=4.0, trust_env=False) as client:
            r = await client.get(f"http://{s.triton_host}:{s.triton_http_port}/v2/health/ready")
            r.raise_for_status()

    names = {"broker": broker(), "database": database(), "object_store": object_store(),
             "milvus": milvus()}
    if s.embedder == "triton":
        names["triton"] = triton()
    results = await asyncio.gather(*(_timed(c) for c in names.values()))
    return dict(zip(names, results, strict=True))


class ReadinessCache:
    """The last :func:`readiness` result, reused for ``ttl_s`` seconds; concurrent
    callers while a round runs wait for that round instead of starting their own."""

    def __init__(self, ttl_s: float = READY_CACHE_S):
        self.ttl_s = ttl_s
        self.rounds = 0  # rounds of checks run (for tests and curiosity)
        self._result: Optional[dict[str, dict[str, Any]]] = None
        self._at = 0.0
        self._running: Optional[asyncio.Future] = None

    async def get(self, state: ApiState) -> dict[str, dict[str, Any]]:
        """The checks' result, at most ``ttl_s`` seconds old."""
        if self._result is not None and time.monotonic() - self._at < self.ttl_s:
            return self._result
        if self._running is None:
            self._running = asyncio.ensure_future(self._round(state))
        return await asyncio.shield(self._running)

    async def _round(self, state: ApiState) -> dict[str, dict[str, Any]]:
        try:
            self.rounds += 1
            self._result = await readiness(state)
            self._at = time.monotonic()
            return self._result
        finally:
            self._running = None
