"""Partitions served in turn (streams/fair_fetch.py), and broker quirk 12 that makes it
necessary: the embedded broker ignores the per-partition byte limit of a Fetch."""
import asyncio
import uuid

from tests.conftest import run

RECORD = b"x" * 4000


async def _topic(bootstrap: str, partitions: int) -> str:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    name = "test-fair-fetch-" + uuid.uuid4().hex[:8]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()
    return name


async def _fill(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)  # 16 KiB batches
    await producer.start()
    try:
        for partition, n in counts.items():
            for _ in range(n):
                await producer.send(topic, RECORD, partition=partition)
        await producer.flush()
    finally:
        await producer.stop()


def _consumer(bootstrap: str, topic: str, **kw):
    from aiokafka import AIOKafkaConsumer

    return AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                            auto_offset_reset="earliest", **kw)


def test_quirk12_the_broker_ignores_the_partition_byte_limit(stack):
    """Asked for at most 64 KiB of one partition (16 records of 4 KB, plus at most one
    16 KiB batch over the limit, on a broker that honours it), the embedded broker
    answers far more in one fetch."""
    async def scenario() -> int:
        topic = await _topic(stack.kafka_bootstrap, 1)
        await _fill(stack.kafka_bootstrap, topic, {0: 600})
        consumer = _consumer(stack.kafka_bootstrap, topic, max_partition_fetch_bytes=64 * 1024)
        await consumer.start()
        try:
            got = 0
            while not got:
                got = sum(len(v) for v in (await consumer.getmany(timeout_ms=2000)).values())
            return got
        finally:
            await consumer.stop()

    first_fetch = run(scenario())
    assert first_fetch > 100, f"the broker honoured the byte limit ({first_fetch} records): quirk 12 is gone"


def _polls_until_second_partition(stack, rotate: bool) -> int:
    """Polls of at most 20 records until one from partition 1 (5 records, sent after
    partition 0's 600 were fetched) comes."""
    from aiokafka.consumer.fetcher import Fetcher

    patched = Fetcher.fetched_records
    if not rotate:
        Fetcher.fetched_records = patched.__wrapped__
    try:
        async def scenario() -> int:
            topic = await _topic(stack.kafka_bootstrap, 2)
            await _fill(stack.kafka_bootstrap, topic, {0: 600})
            consumer = _consumer(stack.kafka_bootstrap, topic, max_poll_records=20)
            await consumer.start()
            try:
                while not await consumer.getmany(timeout_ms=2000):  # partition 0 fetched
                    pass  # (quirk 12: all of it), 20 of its records taken
                await _fill(stack.kafka_bootstrap, topic, {1: 5})
                await asyncio.sleep(2)  # partition 1 fetched too, behind partition 0
                for polls in range(1, 100):
                    batch = await consumer.getmany(timeout_ms=2000)
                    if any(tp.partition == 1 for tp in batch):
                        return polls
                return 100
            finally:
                await consumer.stop()

        return run(scenario())
    finally:
        Fetcher.fetched_records = patched


def test_partitions_take_turns_poll_by_poll(stack):
    """With the rotation, partition 1's records come in the first two polls; without
    it (aiokafka's own order), after partition 0's fetched records are drained."""
    from streams.fair_fetch import rotate_partially_drained

    rotate_partially_drained()
    assert _polls_until_second_partition(stack, rotate=True) <= 2
    assert _polls_until_second_partition(stack, rotate=False) > 10


def _polls_until_first_half(stack, prefer: bool) -> int:
    """On an 8-partition topic whose bulk half (4-7) has 300 records each, fetched: polls
    of at most 20 records until one of partition 0's (5, sent after) comes."""
    from streams import fair_fetch

    async def scenario() -> int:
        topic = await _topic(stack.kafka_bootstrap, 8)
        if prefer:
            fair_fetch.prefer_lanes([topic], bulk_turn=4)
        await _fill(stack.kafka_bootstrap, topic, {p: 300 for p in range(4, 8)})
        consumer = _consumer(stack.kafka_bootstrap, topic, max_poll_records=20)
        await consumer.start()
        try:
            while not await consumer.getmany(timeout_ms=2000):
                pass
            await asyncio.sleep(2)  # every bulk partition fetched
            await _fill(stack.kafka_bootstrap, topic, {0: 5})
            await asyncio.sleep(2)
            for polls in range(1, 100):
                if any(tp.partition == 0 for tp in await consumer.getmany(timeout_ms=2000)):
                    return polls
            return 100
        finally:
            await consumer.stop()
            fair_fetch._LANED.pop(topic, None)

    return run(scenario())


def test_a_laned_topic_polls_its_first_half_first(stack):
    """Lanes first (fair_fetch.prefer_lanes): a single file's records on the first half
    come in the first poll or the next (a bulk turn), where the rotation alone serves
    the four fetched bulk partitions first."""
    from streams.fair_fetch import rotate_partially_drained

    rotate_partially_drained()
    assert _polls_until_first_half(stack, prefer=True) <= 2
    assert _polls_until_first_half(stack, prefer=False) >= 4


class _Cluster:
    def partitions_for_topic(self, topic):
        return set(range(8)) if topic == "laned" else {0, 1}


class _Fetcher:
    """The two attributes of aiokafka's Fetcher that the preference reads."""

    def __init__(self, tps):
        import collections

        self._records = collections.OrderedDict((tp, object()) for tp in tps)
        self._client = type("Client", (), {"cluster": _Cluster()})()


def test_the_bulk_half_goes_last_but_every_bulk_turn_th_poll():
    """Deterministic: with fetched records on both halves, the bulk half's partitions
    are moved behind the first half's on three polls of four and left in the rotation's
    order on the fourth (the bulk lane's least share); a topic without lanes is never
    reordered."""
    from aiokafka.structs import TopicPartition as TP

    from streams import fair_fetch

    fair_fetch.prefer_lanes(["laned"], bulk_turn=4)
    try:
        order = [TP("laned", 5), TP("other", 1), TP("laned", 1), TP("laned", 6), TP("laned", 0)]
        fetcher = _Fetcher(order)
        firsts = []
        for _ in range(8):
            fetcher._records = type(fetcher._records)((tp, None) for tp in order)
            fair_fetch._bulk_last(fetcher)
            firsts.append(list(fetcher._records))
        preferred = [TP("other", 1), TP("laned", 1), TP("laned", 0), TP("laned", 5), TP("laned", 6)]
        assert firsts == [preferred, preferred, preferred, order] * 2
    finally:
        fair_fetch._LANED.pop("laned", None)
