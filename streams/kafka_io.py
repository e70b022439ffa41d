"""Producing and tailing outside Faust workers (CLI, API): plain aiokafka clients
with the broker-quirk settings, serialising through the same Faust records."""
from __future__ import annotations

import time
import uuid
from contextlib import asynccontextmanager
from typing import AsyncIterator, Optional

import faust
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from schemas import StatusEvent
from streams import broker_quirks
from topics import STATUS, TopicSpec


@asynccontextmanager
async def producer(bootstrap: str) -> AsyncIterator[AIOKafkaProducer]:
    """A started aiokafka producer (no idempotence: the embedded broker rejects it)."""
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000,
                            **broker_quirks.producer_kwargs())
    await prod.start()
    try:
        yield prod
    finally:
        await prod.stop()


async def send_record(prod: AIOKafkaProducer, spec: TopicSpec, key: str, record: faust.Record) -> None:
    """Send ``record`` (its orjson serialisation) to ``spec``'s topic, keyed by ``key``;
    waits for the broker's acknowledgement."""
    await prod.send_and_wait(spec.name, key=key.encode(), value=record.dumps())


async def tail_status(bootstrap: str, *, from_beginning: bool = True,
                      idle_timeout_s: Optional[float] = None) -> AsyncIterator[StatusEvent]:
    """Yield status events from the changelog as they arrive (no consumer group).

    Stops after ``idle_timeout_s`` seconds without an event (None: never).
    """
    consumer = AIOKafkaConsumer(
        STATUS.name, bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        client_id=f"ragstream-tail-{uuid.uuid4().hex[:8]}")
    await consumer.start()
    try:
        last = time.monotonic()
        while True:
            batches = await consumer.getmany(timeout_ms=500)
            if batches:
                last = time.monotonic()
            elif idle_timeout_s is not None and time.monotonic() - last > idle_timeout_s:
                return
            for messages in batches.values():
                for msg in messages:
                    yield StatusEvent.loads(msg.value)
    finally:
        await consumer.stop()
