"""Server-sent events from the status changelog.

One :class:`StatusHub` per API process tails the status topic (no consumer group,
from the end as of startup) and fans each event out to the subscribed SSE
clients, so a hundred open dashboards cost one Kafka consumer.  A client that asks
for ``replay=true`` gets its own consumer reading the topic from the beginning (the
compacted changelog: the latest transitions of every document), which then goes on
live.  Events of one document arrive in order (one partition per document).

Wire format (``text/event-stream``)::

    id: <seq>
    event: status
    data: {"document_id": ..., "version": ..., "status": ..., "seq": ..., ...}

(every field of the status event except its ``callback_url``: ``SSE_OMITTED``)

plus a ``: ping`` comment every ``PING_S`` seconds so proxies keep the stream open.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Optional

import orjson
from aiokafka import AIOKafkaConsumer
from tenacity import AsyncRetrying, retry_if_exception_type, wait_fixed

from schemas import StatusEvent
from streams import kafka_auth
from streams.document_ids import local_id
from streams.kafka_io import open_for_display, tail_status
from topics import STATUS

log = logging.getLogger(__name__)
PING_S = 15.0
QUEUE_MAX = 10000  # events buffered per slow client before it is disconnected


@dataclass(eq=False)
class Subscription:
    """One SSE client's filter and queue (``None`` in the queue: the hub dropped it)."""

    project: Optional[str]
    document_id: Optional[str]
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(QUEUE_MAX))

    def matches(self, ev: StatusEvent) -> bool:
        """True when ``ev`` passes this subscription's project/document filter."""
        return (self.project is None or ev.project == self.project) and \
               (self.document_id is None or ev.document_id == self.document_id)


class StatusHub:
    """Tails the status topic once and fans out to subscriptions."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.subs: set[Subscription] = set()
        self._task: Optional[asyncio.Task] = None
        self._consumer: Optional[AIOKafkaConsumer] = None
        self.events = 0  # events read since start

    async def start(self, timeout_s: float = 30.0) -> None:
        """Start the consumer and pin its position at the current end of every
        partition, so events produced after ``start`` returns are never missed."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
            client_id=f"ragstream-api-hub-{uuid.uuid4().hex[:8]}", **kafka_auth.client_options())
        await consumer.start()
        try:
            parts = await asyncio.wait_for(self._partitions(consumer), timeout_s)
            consumer.assign(parts)
            await consumer.seek_to_end(*parts)
            for tp in parts:
                await consumer.position(tp)
        except BaseException:
            await consumer.stop()
            raise
        self._consumer = consumer
        self._task = asyncio.create_task(self._run(), name="status-hub")

    @staticmethod
    async def _partitions(consumer: AIOKafkaConsumer):
        from aiokafka import TopicPartition

        while True:
            await consumer.topics()  # refreshes cluster metadata
            ids = consumer.partitions_for_topic(STATUS.name)
            if ids:
                return [TopicPartition(STATUS.name, p) for p in sorted(ids)]
            await asyncio.sleep(0.5)

    async def _fetch(self) -> dict:
        """One ``getmany`` (≤ 1 s), retried every second for as long as it fails (a
        broker blip must not end the tail; tenacity, the code base's one retry
        pattern; CancelledError is not an Exception, so it is never retried)."""
        async for attempt in AsyncRetrying(
                wait=wait_fixed(1.0), retry=retry_if_exception_type(Exception), reraise=True,
                before_sleep=lambda rs: log.warning("status hub: fetch failed (%s); retrying",
                                                    rs.outcome.exception())):
            with attempt:
                return await self._consumer.getmany(timeout_ms=1000)
        raise AssertionError("unreachable: AsyncRetrying without a stop never gives up")

    async def _run(self) -> None:
        while True:
            batches = await self._fetch()
            for messages in batches.values():
                for msg in messages:
                    try:
                        ev = StatusEvent.loads(msg.value)
                    except Exception:  # noqa: BLE001 — a foreign record: skip it
                        continue
                    self.events += 1
                    self.publish(ev)

    def publish(self, ev: StatusEvent) -> None:
        """Queue ``ev`` for every matching subscription; drop clients that lag behind."""
        for sub in list(self.subs):
            if sub.matches(ev):
                try:
                    sub.queue.put_nowait(ev)
                except asyncio.QueueFull:
                    self.subs.discard(sub)
                    sub.queue = asyncio.Queue(1)
                    sub.queue.put_nowait(None)

    def subscribe(self, project: Optional[str], document_id: Optional[str]) -> Subscription:
        """A new subscription (remove it with :meth:`unsubscribe`)."""
        sub = Subscription(project, document_id)
        self.subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget a subscription."""
        self.subs.discard(sub)

    @property
    def alive(self) -> bool:
        """True while the tailing task runs."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Stop tailing and close the consumer."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self._consumer is not None:
            await self._consumer.stop()


# fields of a status event that SSE frames leave out: a callback URL often carries
# a token, and every client of the project (dashboards included) reads the stream
SSE_OMITTED = ("callback_url",)


def frame(ev: StatusEvent) -> bytes:
    """One SSE frame for a status event: the event's fields as JSON, without
    ``SSE_OMITTED`` (the callback URL), its ``document_id`` the project's own id."""
    data = {k: v for k, v in ev.asdict().items() if k not in SSE_OMITTED}
    data.pop("sealed", None)  # the file name, sealed (schemas/sealing.py): shown blank
    data["document_id"] = local_id(ev.project, ev.document_id)
    return b"id: %d\nevent: status\ndata: %s\n\n" % (ev.seq, orjson.dumps(data))


async def event_stream(hub: StatusHub, *, project: str, document_id: Optional[str],
                       replay: bool, bootstrap: str, keys: Optional[Any] = None) -> AsyncIterator[bytes]:
    """The body of one SSE response: frames for matching events, pings when idle.
    ``keys`` (adapters.document_keys.DocumentKeys) opens each event's sealed file
    name for the project's client (blank without, or for a deleted version).
    Ends when the client disconnects (the server cancels the iterator)."""
    yield b"retry: 2000\n: connected\n\n"
    if replay:
        source = tail_status(bootstrap, from_beginning=True)
        queue: asyncio.Queue = asyncio.Queue(QUEUE_MAX)

        async def pump() -> None:
            async for ev in source:
                if ev.project == project and (document_id is None or ev.document_id == document_id):
                    await queue.put(ev)

        task = asyncio.create_task(pump())
        try:
            while True:
                try:
                    ev = await asyncio.wait_for(queue.get(), PING_S)
                except asyncio.TimeoutError:
                    if task.done():
                        return
                    yield b": ping\n\n"
                    continue
                yield frame(await open_for_display(ev, keys))
        finally:
            task.cancel()
            await source.aclose()
    sub = hub.subscribe(project, document_id)
    try:
        while True:
            try:
                ev = await asyncio.wait_for(sub.queue.get(), PING_S)
            except asyncio.TimeoutError:
                yield b": ping\n\n"
                continue
            if ev is None:  # dropped for lagging behind: the client reconnects
                yield b"event: overflow\ndata: {}\n\n"
                return
            yield frame(await open_for_display(ev, keys))
    finally:
        hub.unsubscribe(sub)
