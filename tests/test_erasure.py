"""DELETE erases (issue 23, failure 4): after a document is deleted, no copy of its
text, vectors or file name can be read back from anything ragstream writes — the
topics (kept for ever, never compacted: tests/test_broker_quirks.py quirk 10), its
dead letters, every physical Milvus collection of the project, the embedding cache,
PostgreSQL, S3 — while a reindex after the delete still rebuilds every other document.

The document is a one-line file whose name and text carry a marker word found nowhere
else; its second version fails (a dead letter carrying the file name).  Before the
delete the marker is asserted to be present (the scan sees what it looks for);
afterwards it is looked for as raw bytes everywhere (records on the topics also as
they open with the data keys left in the database).  Erasure of the topics is
crypto-shredding (schemas/sealing.py, adapters/document_keys.py).
"""
from __future__ import annotations

import time
import uuid

import orjson
import pytest
from drills.leaks import topic_records

from tests.conftest import ingest, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEEP = {
    "pumps.md": "# Pumps\n\nThe pump station energy use is logged every hour.\n",
    "valves.md": "# Valves\n\nGate valves and butterfly valves are exercised each spring.\n",
}


async def _readable(dsn: str, topics: dict[str, list[bytes]]) -> dict[str, list[bytes]]:
    """``topics`` with each sealed record also as it opens with the data keys the
    database holds now (schemas/sealing.py): what anyone with ragstream's own
    storage can read back.  Records that are not sealed are kept as they are."""
    try:
        from adapters.document_keys import DocumentKeys
        from schemas.sealing import open_fields
    except ImportError:  # code without sealing: the raw bytes are all there is
        return topics
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        keys = DocumentKeys(conn)
        out: dict[str, list[bytes]] = {}
        for name, values in topics.items():
            out[name] = []
            for raw in values:
                opened = raw
                try:
                    data = orjson.loads(raw.split(b"\0", 1)[1])
                except (orjson.JSONDecodeError, IndexError):
                    data = None
                if isinstance(data, dict) and data.get("document_id"):
                    key = await keys.existing_key(data["document_id"], int(data.get("version") or 0))
                    if data.get("sealed"):
                        data = open_fields(data, key, data["document_id"], data["version"])
                    elif isinstance(data.get("payload"), dict) and data["payload"].get("sealed"):
                        data["payload"] = open_fields(data["payload"], key, data["document_id"], data["version"])
                    opened = raw + b"\0" + orjson.dumps(data)
                out[name].append(opened)
        return out
    finally:
        await conn.close()


def _collections_holding(store, project: str, marker: str, document_id: str) -> dict[str, int]:
    """``{collection: rows}`` of every physical collection of ``project`` holding rows of
    ``document_id`` or a text with ``marker``."""
    from adapters import collection_aliases as ca
    from adapters.vector_store import quote_literal, scoped_filter

    found = {}
    for name in ca.physical_versions(store, project).values():
        flt = scoped_filter(project, f"document_id == {quote_literal(document_id)} or "
                                     f"text like {quote_literal('%' + marker + '%')} or "
                                     f"filename like {quote_literal('%' + marker + '%')}")
        rows = ca.query_rows(store, name, flt, ["chunk_id"])
        if rows:
            found[name] = len(rows)
    return found


async def _pg_holding(dsn: str, needles: dict[str, bytes]) -> list[str]:
    """``table.column (needle)`` of every text, varchar, bytea and json column of the
    public schema holding one of ``needles`` (name → bytes; text columns are searched
    for the needle decoded as UTF-8)."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        columns = await conn.fetch(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' AND data_type IN"
            " ('text', 'character varying', 'bytea', 'json', 'jsonb')")
        hits = []
        for c in columns:
            table, column = c["table_name"], c["column_name"]
            for name, needle in needles.items():
                if c["data_type"] == "bytea":
                    sql = f'SELECT count(*) FROM "{table}" WHERE position($1::bytea in "{column}") > 0'
                    arg = needle
                else:
                    try:
                        arg = needle.decode()
                    except UnicodeDecodeError:
                        continue
                    sql = f'SELECT count(*) FROM "{table}" WHERE strpos("{column}"::text, $1) > 0'
                if await conn.fetchval(sql, arg):
                    hits.append(f"{table}.{column} ({name})")
        return hits
    finally:
        await conn.close()


async def _s3_holding(settings, marker: bytes) -> list[str]:
    """``bucket/key`` of every object, in the data bucket and the broker's, whose key or
    body holds ``marker``."""
    from adapters.object_store import ObjectStore

    hits = []
    async with ObjectStore(settings) as store:
        buckets = [b["Name"] for b in (await store.client.list_buckets())["Buckets"]]
        for bucket in buckets:
            paginator = store.client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=bucket):
                for obj in page.get("Contents", []):
                    key = obj["Key"]
                    body = await (await store.client.get_object(Bucket=bucket, Key=key))["Body"].read()
                    if marker in key.encode() or marker in body:
                        hits.append(f"{bucket}/{key}")
    return hits


async def _dead_letters_of(bootstrap: str, document_id: str) -> list:
    from cli.dlq import read_dead_letters

    return [e for e in await read_dead_letters(bootstrap)
            if e.letter is not None and e.letter.document_id == document_id]


async def _wait_status(settings, document_id: str, status: str, timeout_s: float = 180) -> None:
    from adapters.metadata import Metadata

    deadline = time.monotonic() + timeout_s
    async with Metadata(settings.pg_dsn) as md:
        while True:
            row = await md.get_document(document_id)
            if row is not None and row["status"] == status:
                return
            assert time.monotonic() < deadline, f"{document_id} not {status} in {timeout_s} s: {row}"
            time.sleep(0.5)


def _vector_needles(store, project: str, document_id: str) -> dict[str, bytes]:
    """The document's first vector as the embeddings topic (orjson) and the embedding
    cache (float32 little-endian) would hold it."""
    import numpy as np

    from adapters import collection_aliases as ca
    from adapters.vector_store import quote_literal, scoped_filter

    name = next(iter(ca.physical_versions(store, project).values()))
    # the first collection may be released (a reindex moved the alias away from it)
    rows = ca.query_rows(store, name, scoped_filter(project, f"document_id == {quote_literal(document_id)}"),
                         ["vector"])
    vector = np.asarray(rows[0]["vector"], dtype=np.float32)
    as_json = orjson.dumps([float(x) for x in vector[:3]])[1:-1]  # "a,b,c" as a record spells it
    return {"vector-json": as_json, "vector-f32": vector[:8].astype("<f4").tobytes()}


def test_delete_leaves_no_copy_anywhere_and_reindex_rebuilds_the_rest(stack, worker, tmp_path, project):
    from adapters import collection_aliases as ca
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from streams.ingest import queue_delete
    from streams.kafka_io import producer
    from streams.reindex import reindex

    marker = "zqmark" + uuid.uuid4().hex[:10]
    for name, text in KEEP.items():
        (tmp_path / name).write_text(text)
    secret = tmp_path / f"{marker}.txt"
    secret.write_text(f"The {marker} plan is confidential.\n")
    first = ingest([tmp_path / n for n in KEEP], project)
    assert {e.status for e in first.last.values()} == {"COMPLETED"}, first.last
    # the secret document's user metadata carries the marker too (a delete blanks it)
    own = ingest([secret], project, user_metadata={"note": f"{marker} memo", "tags": [marker]})
    assert {e.status for e in own.last.values()} == {"COMPLETED"}, own.last
    doc = own.results[0]
    # version 2 of the same document fails: a dead letter carrying its file name
    broken = tmp_path / f"{marker}-2.pdf"
    broken.write_bytes(b"%PDF-1.7\n" + b"\x00\xff" * 300 + b"\n%%EOF\n")
    second = ingest([broken], project, document_id=doc.local_id)
    assert second.last[doc.document_id].status == "FAILED", second.last
    # a reindex: the document's rows in two physical collections (v1 kept for rollback)
    run(reindex(project, settings=stack))
    store = VectorStore(stack.milvus_uri)
    needles = {"marker": marker.encode(), **_vector_needles(store, project, doc.document_id)}

    # the scans see what they look for: the marker and the vector are everywhere now
    topics = run(_readable(stack.pg_dsn, run(topic_records(stack.kafka_bootstrap))))
    assert len(_collections_holding(store, project, marker, doc.document_id)) == 2
    assert run(_dead_letters_of(stack.kafka_bootstrap, doc.document_id))
    assert run(_s3_holding(stack, marker.encode()))
    before = {n: [t for t, values in topics.items() if any(needle in v for v in values)]
              for n, needle in needles.items()}
    assert before["vector-json"] and before["marker"], f"the scan of the topics misses what it looks for: {before}"
    pg_before = run(_pg_holding(stack.pg_dsn, needles))
    assert any(h.startswith("embedding_cache.vector") for h in pg_before), pg_before
    assert any(h.startswith("document_versions.user_metadata") for h in pg_before), pg_before

    async def delete() -> None:
        async with Metadata(stack.pg_dsn) as md, producer(stack.kafka_bootstrap) as prod:
            latest = await md.latest_version(doc.document_id)
            await queue_delete(document_id=doc.document_id, version=latest["version"], project=project,
                               category="default", filename=latest["filename"], bucket=stack.bucket,
                               key=latest["raw_key"], sha256="", size=0, producer=prod, metadata=md)
    run(delete())
    run(_wait_status(stack, doc.document_id, "DELETED"))
    time.sleep(3)  # the projection and the other stages settle

    topics = run(_readable(stack.pg_dsn, run(topic_records(stack.kafka_bootstrap))))
    left = {n: [t for t, values in topics.items() if any(needle in v for v in values)]
            for n, needle in needles.items()}
    assert left == {n: [] for n in needles}, f"still on the topics: {left}"
    assert _collections_holding(store, project, marker, doc.document_id) == {}
    assert run(_pg_holding(stack.pg_dsn, needles)) == []
    assert run(_s3_holding(stack, marker.encode())) == []
    letters = run(_dead_letters_of(stack.kafka_bootstrap, doc.document_id))
    assert letters and all(marker.encode() not in orjson.dumps(e.letter.asdict()) for e in letters)

    # replay after the delete: a reindex rebuilds every other document, none of it
    report = run(reindex(project, settings=stack))
    assert report.documents == len(KEEP)
    rebuilt = ca.chunk_versions(store, project, report.collection)
    kept_docs = {r.document_id for r in first.results if r.document_id != doc.document_id}
    assert {d for d, _ in rebuilt.values()} == kept_docs
    assert _collections_holding(store, project, marker, doc.document_id) == {}
