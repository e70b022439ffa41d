"""Consumer lag (streams/lag.py): per partition, on the embedded broker, whose
ListOffsets answers too low on S3 storage (streams/broker_quirks.py quirk 5): the
counts below are exact only because end offsets come from the Fetch high watermark.
Also ``ragstream lag --json`` and the workers' Prometheus gauges."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams import broker_quirks
from streams.lag import LagTarget, by_stage, read_lag
from tests.conftest import WORKER_METRICS_PORT, run

pytestmark = pytest.mark.integration
N = 30  # records produced one by one: ListOffsets on S3 storage undercounts them


async def _topic_with_records(bootstrap: str, partitions: int, n: int) -> str:
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, **broker_quirks.producer_kwargs())
    await prod.start()
    try:
        for i in range(n):
            await prod.send_and_wait(topic, b"v", partition=i % partitions)
    finally:
        await prod.stop()
    return topic


async def _consume_and_commit(bootstrap: str, group: str, tp: TopicPartition, k: int) -> None:
    cons = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await cons.start()
    try:
        cons.assign([tp])
        await cons.seek_to_beginning(tp)
        got = []
        while len(got) < k:
            got += (await cons.getmany(tp, timeout_ms=1000, max_records=k - len(got))).get(tp, [])
        await cons.commit({tp: got[-1].offset + 1})
    finally:
        await cons.stop()


def test_lag_counts_backlog_then_commits(stack):
    """N records, no consumer: lag N (every partition exact) and a positive age;
    after the group commits 5 on one partition, that partition's lag drops by 5."""
    bootstrap = stack.kafka_bootstrap
    topic = run(_topic_with_records(bootstrap, 2, N))
    time.sleep(1.0)  # the oldest record is now at least a second old
    target = LagTarget("embed", f"lag-test-{uuid.uuid4().hex[:6]}", topic)

    rows = run(read_lag(bootstrap, [target]))
    assert [(r.partition, r.committed, r.end, r.lag) for r in rows] == [(0, None, N // 2, N // 2),
                                                                         (1, None, N // 2, N // 2)]
    assert all(1.0 <= r.oldest_age_s < 120 for r in rows)
    assert not any(r.group_exists for r in rows)

    run(_consume_and_commit(bootstrap, target.group, TopicPartition(topic, 0), 5))
    rows = run(read_lag(bootstrap, [target]))
    assert [(r.partition, r.committed, r.end, r.lag) for r in rows] == [(0, 5, N // 2, N // 2 - 5),
                                                                         (1, None, N // 2, N // 2)]
    summary = by_stage(rows)["embed"]
    assert summary["groups"] == {target.group: N - 5} and summary["lag"] == N - 5
    assert summary["end"] == N and summary["oldest_age_s"] >= 1.0


def test_lag_cli_json(stack):
    """``ragstream lag --json --stages embed``: one row per partition of the embed
    stage's topic, in group ragstream-embed."""
    proc = subprocess.run([str(Path(sys.executable).with_name("ragstream")), "lag", "--json",
                           "--stages", "embed"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)
    assert len(rows) == stack.topic_partitions
    assert {(r["group"], r["topic"]) for r in rows} == {("ragstream-embed", "ragstream.enhanced-chunks")}
    assert set(rows[0]) >= {"committed", "end", "lag", "oldest_age_s", "partition", "stage"}


def test_worker_exports_lag_gauges(worker):
    """Each stage worker serves ragstream_consumer_lag{stage,partition} and the
    oldest-age gauge on its metrics port (refreshed every RAGSTREAM_LAG_REFRESH_S)."""
    from streams.worker import stage_metrics_port

    url = f"http://127.0.0.1:{stage_metrics_port(WORKER_METRICS_PORT, 'embed')}/metrics"
    deadline, text = time.monotonic() + 180, ""
    while time.monotonic() < deadline:
        try:
            text = httpx.get(url, timeout=5).text
        except httpx.HTTPError:
            text = ""
        if 'ragstream_consumer_lag{partition="0",stage="embed"}' in text:
            break
        time.sleep(1)
    assert 'ragstream_consumer_lag{partition="0",stage="embed"}' in text, text[-1500:]
    assert 'ragstream_consumer_lag_oldest_age_seconds{partition="0",stage="embed"}' in text


def test_a_kept_lag_reader_fetches_nothing_between_reads(stack):
    """A stage keeps one LagReader for its life; its fetch consumer's partitions are
    paused after each read (broker_quirks.quiet: aiokafka fetched them in the
    background, about 19 Fetch requests a second per idle stage), and the next read
    still counts records produced since."""
    from streams.lag import LagReader

    async def scenario() -> tuple[list, set, set, list]:
        bootstrap = stack.kafka_bootstrap
        topic = await _topic_with_records(bootstrap, 2, 4)
        target = LagTarget("embed", f"lag-test-{uuid.uuid4().hex[:6]}", topic)
        async with LagReader(bootstrap) as reader:
            first = await reader.read([target])
            assigned, paused = set(reader._meta.assignment()), set(reader._meta.paused())
            prod = AIOKafkaProducer(bootstrap_servers=bootstrap, **broker_quirks.producer_kwargs())
            await prod.start()
            try:
                await prod.send_and_wait(topic, b"v", partition=1)
            finally:
                await prod.stop()
            second = await reader.read([target])
        return first, assigned, paused, second

    first, assigned, paused, second = run(scenario())
    assert [r.lag for r in first] == [2, 2] and [r.lag for r in second] == [2, 3]
    assert assigned and paused == assigned
