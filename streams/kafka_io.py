"""Producing and tailing outside Faust workers (CLI, API): plain aiokafka clients
with the broker-quirk settings, serialising through the same Faust records."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Optional

import faust
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from schemas import StatusEvent
from streams import broker_quirks, kafka_auth, tracing
from topics import STATUS, TopicSpec

log = logging.getLogger(__name__)


@asynccontextmanager
async def producer(bootstrap: str) -> AsyncIterator[AIOKafkaProducer]:
    """A started aiokafka producer (no idempotence: the embedded broker rejects it)."""
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000,
                            **broker_quirks.producer_kwargs(), **kafka_auth.client_options())
    await prod.start()
    try:
        yield prod
    finally:
        await prod.stop()


async def send_record(prod: AIOKafkaProducer, spec: TopicSpec, key: str, record: faust.Record,
                      partition: Optional[int] = None) -> None:
    """Send ``record`` (its orjson serialisation) to ``spec``'s topic, keyed by ``key``
    (on ``partition`` when given: a lane, topics/lanes.py; else the key picks); waits
    for the broker's acknowledgement.  The record's version span, when tracing
    (streams/tracing.py), goes in the headers."""
    await prod.send_and_wait(spec.name, key=key.encode(), value=record.dumps(), partition=partition,
                             headers=tracing.headers_for(record))


async def open_for_display(ev: StatusEvent, keys: Optional[Any]) -> StatusEvent:
    """``ev`` with its sealed content opened by ``keys`` (DocumentKeys) when both are
    there; as it is otherwise, and when it does not open: a broken seal, or the key
    store (PostgreSQL) away, shows the file name blank instead of raising -- this is
    for people watching, not for deciding, and a follow must outlive a database
    outage (tests/test_delivery.py::test_postgres_outage_fails_nothing_and_loses_no_status)."""
    from schemas.sealing import SealBroken

    if keys is None or not getattr(ev, "sealed", None):
        return ev
    try:
        return (await keys.open(ev))[0]
    except SealBroken:
        return ev
    except Exception as exc:
        # "the key store is away" is the retry policy's one judgement, not a tuple kept
        # here: a hand-kept tuple missed asyncpg's InternalClientError ("cannot switch
        # to state 12; another operation (2) is in progress", a pooled connection that
        # PostgreSQL's shutdown broke), and the CI run of 2026-12-04 died on it
        from agents.retry_policy import is_transient  # lazy: agents imports the stages

        if not is_transient(exc):
            raise
        log.warning("status of %s shown without its file name: key store unavailable (%s)",
                    ev.document_id, type(exc).__name__)
        return ev


async def tail_status(bootstrap: str, *, from_beginning: bool = True,
                      idle_timeout_s: Optional[float] = None) -> AsyncIterator[StatusEvent]:
    """Yield status events from the changelog as they arrive (no consumer group).

    The partitions are assigned by hand, not subscribed: a subscription follows the
    topic's metadata, and when the embedded broker answered metadata requests with
    errors while its S3 storage was away, a subscribed tail lost its partitions and
    never read again (drill ``restart-s3``); an assigned one keeps its positions and
    resumes.  A record that is not a status event is skipped.  Stops after
    ``idle_timeout_s`` seconds without an event (None: never).  An event's file name
    is sealed (schemas/sealing.py): :func:`open_for_display` shows it.
    """
    from schemas.decode import UndecodableRecord, decode_event

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        client_id=f"ragstream-tail-{uuid.uuid4().hex[:8]}", **kafka_auth.client_options())
    try:  # stop() in the finally also when start() fails (else aiokafka warns "Unclosed")
        await consumer.start()
        partitions: set = set()
        while not partitions:  # a poll for the topic's metadata, not a retry of an error
            await consumer.topics()  # a metadata refresh
            partitions = consumer.partitions_for_topic(STATUS.name) or set()
            if not partitions:
                await asyncio.sleep(0.5)
        tps = [TopicPartition(STATUS.name, p) for p in sorted(partitions)]
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
        else:
            await consumer.seek_to_end(*tps)
        last = time.monotonic()
        while True:
            batches = await consumer.getmany(timeout_ms=500)
            if batches:
                last = time.monotonic()
            elif idle_timeout_s is not None and time.monotonic() - last > idle_timeout_s:
                return
            for messages in batches.values():
                for msg in messages:
                    try:
                        yield decode_event(StatusEvent, msg.value)
                    except UndecodableRecord:
                        continue
    finally:
        await consumer.stop()


async def send_raw(prod: AIOKafkaProducer, topic: str, key: Optional[bytes],
                   value: Optional[bytes]) -> tuple[int, int]:
    """Send ``value`` bytes as they are to ``topic`` keyed by ``key``; waits for the
    acknowledgement and returns the record's (partition, offset)."""
    meta = await prod.send_and_wait(topic, key=key, value=value)
    return meta.partition, meta.offset


async def read_topic(bootstrap: str, topic: str, *,
                     timeout_s: float = 30.0) -> AsyncIterator[ConsumerRecord]:
    """Yield every record of ``topic`` present when called (in offset order within each
    partition), then stop: no consumer group, nothing committed.

    The end is each partition's end offset read at the start, from a Fetch high
    watermark (``broker_quirks.end_offsets``: the embedded broker's ListOffsets is
    too low).
    Raises ``KeyError`` when the broker does not know ``topic`` and ``TimeoutError``
    when ``timeout_s`` seconds pass without a record arriving before those end
    offsets (silence, not the whole read: a long topic takes as long as it takes,
    like streams/replay.Replay.run_to).
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", client_id=f"ragstream-read-{uuid.uuid4().hex[:8]}",
        **kafka_auth.client_options())
    try:  # stop() in the finally also when start() fails (else aiokafka warns "Unclosed")
        await consumer.start()
        if topic not in await consumer.topics():
            raise KeyError(f"topic {topic} does not exist on {bootstrap}")
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        ends = await broker_quirks.end_offsets(bootstrap, partitions)  # quirk 5
        starts = await consumer.beginning_offsets(partitions)
        pending = {tp for tp in partitions if ends[tp] > starts[tp]}
        for tp in pending:
            consumer.seek(tp, starts[tp])
        deadline = time.monotonic() + timeout_s
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{topic}: no record arrived for {timeout_s:g} s before the end offsets "
                                   "were reached")
            batches = await consumer.getmany(*pending, timeout_ms=int(min(remaining, 0.5) * 1000))
            for tp, messages in sorted(batches.items(), key=lambda item: item[0].partition):
                for msg in messages:
                    if msg.offset < ends[tp]:
                        yield msg
            if any(batches.values()):  # progress: the silence is counted from here
                deadline = time.monotonic() + timeout_s
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
    finally:
        await consumer.stop()


async def status_history(bootstrap: str, *, timeout_s: float = 60.0) -> list[StatusEvent]:
    """Every status event on the changelog when called, in offset order per partition
    (records that are not status events skipped).  Complete by construction: it reads
    up to the end offsets (:func:`read_topic`), where a tail that stops after some
    idle seconds can stop early — a broker just restarted on S3 storage may answer
    a Fetch empty while records remain.  Raises like :func:`read_topic`."""
    from schemas.decode import UndecodableRecord, decode_event

    out = []
    async for msg in read_topic(bootstrap, STATUS.name, timeout_s=timeout_s):
        try:
            out.append(decode_event(StatusEvent, msg.value))
        except UndecodableRecord:
            continue
    return out
