"""notify stage: the status changelog → completion callbacks.

For every terminal state (COMPLETED, FAILED, DELETED) whose event carries a
``callback_url``, the agent writes one row to the ``callbacks`` outbox
(adapters/callbacks.py; primary key = idempotency key, so redeliveries and replays
queue nothing new) and hands it to a background delivery task.  Delivery retries
with exponential backoff and a cap, gives each attempt a total deadline and reads at
most a few KiB of the answer, signs ``t.body`` with the project's secret(s), and
refuses non-public addresses unless allow-listed.  The agent itself never waits on
a receiver: a slow or failing receiver cannot stall the status stream.  A timer
sweeps due rows every ``SWEEP_S`` seconds, so callbacks left pending by a crashed
worker are resumed (rows carry a lease).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Optional

import faust

from adapters.callbacks import AllowList, Callbacks, callback_body, deliver, guarded_client
from adapters.object_keys import processed_key
from agents.context import StageContext
from agents.runner import Stage
from schemas import TERMINAL, DocumentStatus, StatusEvent
from topics import STATUS

STAGE = "notify"
SWEEP_S = 10.0
MAX_CONCURRENT = 16
log = logging.getLogger(__name__)


class Notifier:
    """Per-worker delivery state: the outbox, one HTTP client, in-flight tasks."""

    def __init__(self, ctx: StageContext):
        self.ctx = ctx
        self.settings = ctx.settings
        self._callbacks: Optional[Callbacks] = None
        self._client = None
        self._inflight: dict[str, asyncio.Task] = {}
        self._sem = asyncio.Semaphore(MAX_CONCURRENT)

    async def callbacks(self) -> Callbacks:
        """The outbox over the worker's PostgreSQL pool (schema upgraded by ``resources.metadata``)."""
        if self._callbacks is None:
            metadata = await self.ctx.resources.metadata()
            self._callbacks = Callbacks(metadata.pool)
        return self._callbacks

    def client(self):
        """The guarded httpx client (created on first use)."""
        if self._client is None:
            self._client = guarded_client(AllowList.parse(self.settings.callback_allow_hosts),
                                          self.settings.callback_timeout_s)
        return self._client

    async def on_status(self, event: StatusEvent) -> bool:
        """Queue the callback of a terminal event; True when a new row was queued."""
        if not event.callback_url or DocumentStatus(event.status) not in TERMINAL:
            return False
        output = None
        if event.status == DocumentStatus.COMPLETED.value:
            key = processed_key(event.project, event.document_id, event.version)
            bucket = self.settings.bucket
            output = {"bucket": bucket, "key": key, "url": f"s3://{bucket}/{key}"}
        body = callback_body(document_id=event.document_id, project=event.project,
                             version=event.version, status=event.status, output=output,
                             error=event.error, chunks=event.chunks_done or event.chunks_total,
                             at=event.at, error_code=event.error_code,
                             failed_parts=getattr(event, "failed_parts", None))
        cb = await self.callbacks()
        created = await cb.enqueue(document_id=event.document_id, version=event.version,
                                   status=event.status, project=event.project,
                                   url=event.callback_url, body=body)
        if created:
            self.schedule(f"{event.document_id}:v{event.version}:{event.status}")
        return created

    def schedule(self, key: str) -> None:
        """Start delivering ``key`` in the background unless it is already in flight."""
        if key in self._inflight:
            return
        task = asyncio.ensure_future(self._deliver(key))
        self._inflight[key] = task
        task.add_done_callback(lambda _t, k=key: self._inflight.pop(k, None))

    async def _deliver(self, key: str) -> None:
        async with self._sem:
            try:
                s = self.settings
                await deliver(await self.callbacks(), self.client(), key,
                              max_attempts=s.callback_max_attempts, backoff_s=s.callback_backoff_s,
                              backoff_max_s=s.callback_backoff_max_s, timeout_s=s.callback_timeout_s,
                              secret_overlap_s=s.callback_secret_overlap_s)
            except Exception:  # noqa: BLE001 — the sweep retries; never kill the worker
                log.exception("callback %s: delivery crashed; the sweep will retry it", key)

    async def sweep(self) -> int:
        """Schedule every due pending callback; returns how many were scheduled."""
        keys = [k for k in await (await self.callbacks()).due() if k not in self._inflight]
        for key in keys:
            self.schedule(key)
        return len(keys)

    async def close(self) -> None:
        """Cancel in-flight deliveries (their rows stay pending, their leases given up
        so the next notify worker resumes them at once) and close the client."""
        for task in list(self._inflight.values()):
            task.cancel()
        if self._callbacks is not None:
            try:
                await self._callbacks.release()
            except Exception:  # noqa: BLE001 — the leases then expire by themselves
                log.warning("notify: could not release callback leases on stop")
        if self._client is not None:
            await self._client.aclose()


def stage(ctx: StageContext) -> Stage:
    """notify: queue the callback of every terminal event, retried until the outbox
    row is written (never past an unwritten one); never fails a document."""
    notifier = Notifier(ctx)
    ctx.notifier = notifier  # for extras()

    async def on_status(ctx_: StageContext, event: StatusEvent) -> None:
        await notifier.on_status(event)

    return Stage(STAGE, STATUS, on_status, guard=False, fails_documents=False,
                 deadline=float("inf"))


def extras(app: faust.App, ctx: StageContext) -> None:
    """The sweep timer that resumes due callbacks, and closing on shutdown."""
    notifier: Notifier = ctx.notifier

    @app.timer(interval=SWEEP_S)
    async def sweep_callbacks() -> None:
        try:
            await notifier.sweep()
        except Exception:  # noqa: BLE001
            log.exception("notify: sweep failed")

    ctx.closers.append(notifier.close)  # before the PostgreSQL pool its release needs closes
