"""Where a marker word can still be read: every place ragstream writes, scanned for
its bytes (the ``leaked`` count of the ``tenants`` and ``lifecycle`` drills and the
erasure tests).

- topics: every record (key and value, raw bytes) of every catalogue topic, from the
  earliest retained offset to the end;
- Milvus: every physical collection of the project (``text`` and ``filename`` LIKE
  the marker), not only what the aliases point at;
- PostgreSQL: every text, varchar, jsonb and bytea column of every table;
- S3: every object under the project's prefixes (``raw/``, ``work/``,
  ``processed/``, ``staging/``, ``incoming/``), key and content.

A marker is a word made for one run (e.g. ``wombat1a2b3c4d``), so any find is a copy
of the document that carried it.
"""
from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

SCAN_TIMEOUT_S = 60.0


async def topic_records(bootstrap: str) -> dict[str, list[bytes]]:
    """``{topic: [key + b"\\0" + value, ...]}``: every record of every catalogue topic,
    from the earliest retained offset to the end offsets read once at the start
    (``broker_quirks.end_offsets``: a Fetch, since ListOffsets answers too low here).
    Raises TimeoutError when a partition cannot be read to its end in
    ``SCAN_TIMEOUT_S`` seconds."""
    from streams import broker_quirks
    from topics import ALL

    out: dict[str, list[bytes]] = {spec.name: [] for spec in ALL}
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest", group_id=None)
    await consumer.start()
    try:
        parts = [TopicPartition(spec.name, p) for spec in ALL
                 for p in sorted(consumer.partitions_for_topic(spec.name) or ())]
        # one end-offsets call for every partition: a second call in the same run
        # ended in a CancelledError inside partition_heads' consumer.stop()
        ends = await broker_quirks.end_offsets(bootstrap, parts)
        consumer.assign(parts)
        for tp in parts:
            await consumer.seek_to_beginning(tp)
        pending = {tp for tp in parts if ends[tp] > 0}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SCAN_TIMEOUT_S
        while pending and loop.time() < deadline:
            batches = await consumer.getmany(*pending, timeout_ms=500, max_records=1000)
            for tp, messages in batches.items():
                out[tp.topic] += [(m.key or b"") + b"\0" + (m.value or b"")
                                  for m in messages if m.offset < ends[tp]]
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        if pending:
            raise TimeoutError(f"{sorted({tp.topic for tp in pending})}: could not read to the end "
                               f"in {SCAN_TIMEOUT_S:g} s")
    finally:
        await consumer.stop()
    return out


async def topic_hits(bootstrap: str, marker: bytes) -> dict[str, int]:
    """``{topic: records whose key or value holds marker}`` over every catalogue topic."""
    counts = {topic: sum(marker in r for r in records)
              for topic, records in (await topic_records(bootstrap)).items()}
    return {topic: n for topic, n in counts.items() if n}


def milvus_hits(milvus_uri: str, project: str, marker: str) -> dict[str, int]:
    """``{collection: rows whose text or file name holds marker}`` over every physical
    collection of ``project`` (blocking)."""
    from adapters import collection_aliases as ca
    from adapters.vector_store import VectorStore, quote_literal, scoped_filter

    like = quote_literal(f"%{marker}%")
    flt = scoped_filter(project, f"text like {like} or filename like {like}")
    store = VectorStore(milvus_uri)
    try:
        out = {}
        for name in ca.physical_versions(store, project).values():
            rows = ca.query_rows(store, name, flt, ["chunk_id"], limit=16384)
            if rows:
                out[name] = len(rows)
        return out
    finally:
        store.close()


async def postgres_hits(dsn: str, marker: str) -> dict[str, int]:
    """``{"table.column": rows holding marker}`` over every text-like column."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        cols = await conn.fetch(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'bytea')")
        out = {}
        for c in cols:
            table, column = c["table_name"], c["column_name"]
            if c["data_type"] == "bytea":
                expr = f'position($1::bytea in "{column}") > 0'
                arg: Any = marker.encode()
            else:
                expr = f'strpos("{column}"::text, $1) > 0'
                arg = marker
            n = await conn.fetchval(f'SELECT count(*) FROM "{table}" WHERE {expr}', arg)
            if n:
                out[f"{table}.{column}"] = int(n)
        return out
    finally:
        await conn.close()


async def object_hits(settings: Any, project: str, marker: bytes) -> dict[str, int]:
    """``{key: 1}`` for every object under the project's prefixes whose key or bytes
    hold marker."""
    from adapters.object_store import ObjectStore

    out = {}
    async with ObjectStore(settings) as store:
        for area in ("raw", "work", "processed", "staging", "incoming"):
            async for key in store.list_keys(f"{area}/{project}/"):
                if marker in key.encode() or marker in await store.get_bytes(key):
                    out[key] = 1
    return out


async def leak_report(settings: Any, project: str, marker: str) -> dict[str, dict[str, int]]:
    """Every place above that still holds ``marker``: ``{"topics": {...}, "milvus":
    {...}, "postgres": {...}, "s3": {...}}`` (empty dicts when clean)."""
    return {
        "topics": await topic_hits(settings.kafka_bootstrap, marker.encode()),
        "milvus": await asyncio.to_thread(milvus_hits, settings.milvus_uri, project, marker),
        "postgres": await postgres_hits(settings.pg_dsn, marker),
        "s3": await object_hits(settings, project, marker.encode()),
    }


def leak_count(report: dict[str, dict[str, int]]) -> int:
    """Total finds of a :func:`leak_report`."""
    return sum(sum(v.values()) for v in report.values())
