"""A tiny Faust app with one table, run as a subprocess by tests/test_broker_quirks.py.

    python tests/probes/faust_table_probe.py write TOPIC N OUT   count N keys into the table
    python tests/probes/faust_table_probe.py read  TOPIC 0 OUT   recover the table only

Either way, once the table holds what it should (write) or recovery finished
(read), the table is dumped as JSON to OUT and the worker stops itself (SIGTERM).
Broker-quirk settings come from streams.broker_quirks (RAGSTREAM_BROKER_QUIRKS).
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import faust  # noqa: E402

from streams import broker_quirks  # noqa: E402
from streams.settings import get_settings  # noqa: E402

mode, topic_name, count, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
settings = get_settings()
datadir = settings.data_dir / "faust" / f"probe-{topic_name}"
datadir.mkdir(parents=True, exist_ok=True)
app = faust.App(f"probe-{topic_name}", broker=f"kafka://{settings.kafka_bootstrap}",
                store="memory://", topic_partitions=1, web_enabled=False, autodiscover=False,
                datadir=str(datadir),
                consumer_auto_offset_reset="earliest",
                # linger 50 ms so that, without the workaround, changelog writes really
                # are batched (otherwise batching depends on timing and load)
                producer_linger=0.05, **broker_quirks.faust_settings())
table = app.Table("counts", default=int, partitions=1)
source = app.topic(topic_name, partitions=1, key_type=str, value_type=str,
                   key_serializer="raw", value_serializer="raw")
done = {"dumped": False}


def dump() -> None:
    out.write_text(json.dumps(dict(table.items()), sort_keys=True))
    done["dumped"] = True
    os.kill(os.getpid(), signal.SIGTERM)


@app.agent(source)
async def counter(stream):
    async for key, _value in stream.items():
        table[key] += 1


@app.task
async def produce() -> None:
    if mode == "write":
        for i in range(count):
            await source.send(key=f"k{i:05d}", value="1")


@app.timer(0.5)
async def watch() -> None:
    if done["dumped"] or app.rebalancing or not app.tables.recovery.completed.is_set():
        return
    if mode == "read" or len(table) >= count:
        dump()


async def create_source_topic() -> None:
    """Pre-create the source topic with one partition (the broker's default is more)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        if topic_name not in await admin.list_topics():
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
    finally:
        await admin.close()


if __name__ == "__main__":
    import asyncio

    asyncio.run(create_source_topic())
    asyncio.set_event_loop(asyncio.new_event_loop())
    faust.Worker(app, loglevel="warning", quiet=True).execute_from_commandline()
