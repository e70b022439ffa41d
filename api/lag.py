"""Per-stage consumer lag: end offsets of each stage's input topic minus the offsets
its consumer group committed.

A stage runs either in the all-stages group ``ragstream`` or in its own group
``ragstream-{stage}`` (streams/app.py ``app_id``); every group that exists and
consumes the stage's topic is reported.  Committed offsets are fetched with
explicit partitions (the embedded broker drops OffsetFetch for "all partitions").
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.app import STAGES
from streams import broker_quirks
from topics import STAGE_TOPICS

CACHE_S = 3.0
_cache: dict[str, tuple[float, dict[str, Any]]] = {}


async def stage_lag(bootstrap: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """``{stage: {"topic", "groups": {group: lag}, "lag": max over groups, "end"}}``
    (messages), cached for ``CACHE_S`` seconds.  Raises on a broker timeout."""
    hit = _cache.get(bootstrap)
    if hit and time.monotonic() - hit[0] < CACHE_S:
        return hit[1]
    result = await asyncio.wait_for(_compute(bootstrap), timeout_s)
    _cache[bootstrap] = (time.monotonic(), result)
    return result


async def _compute(bootstrap: str) -> dict[str, Any]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=8000)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await admin.start()
    await consumer.start()
    try:
        groups = {g for g, *_ in await admin.list_consumer_groups()}
        await consumer.topics()
        out: dict[str, Any] = {}
        ends_cache: dict[str, dict[TopicPartition, int]] = {}
        for stage in STAGES:
            spec, _ = STAGE_TOPICS.get(stage, (None, None))
            if spec is None:
                continue
            parts = [TopicPartition(spec.name, p)
                     for p in sorted(consumer.partitions_for_topic(spec.name) or ())]
            if spec.name not in ends_cache:
                ends_cache[spec.name] = await broker_quirks.end_offsets(bootstrap, parts)
            ends = ends_cache[spec.name]
            entry = {"topic": spec.name, "end": sum(ends.values()), "groups": {}, "lag": None}
            for group in (f"ragstream-{stage}", "ragstream"):
                if group not in groups or not parts:
                    continue
                committed = await admin.list_consumer_group_offsets(group, partitions=parts)
                lag = sum(max(0, ends[tp] - max(0, committed[tp].offset if tp in committed else 0))
                          for tp in parts)
                entry["groups"][group] = lag
            if entry["groups"]:
                entry["lag"] = max(entry["groups"].values())
            out[stage] = entry
        return out
    finally:
        await consumer.stop()
        await admin.close()
