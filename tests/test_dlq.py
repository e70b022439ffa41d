"""Dead letters: the record stays compatible, poison keeps its bytes, and
``ragstream dlq list|redrive`` against a real broker."""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import orjson
import pytest

from conftest import ROOT, run
from streams import broker_quirks
from schemas import DeadLetter, UploadEvent, decode_event, undecodable_dead_letter
from cli.dlq import DeadLetterEntry, RedriveError, parse_since, plan_redrive, select
from topics import DEAD_LETTERS, UPLOADS

RAGSTREAM = ROOT / ".venv" / "bin" / "ragstream"


def upload(document_id: str) -> UploadEvent:
    return UploadEvent(document_id=document_id, version=3, action="upload", project="p", category="c",
                       filename="a.pdf", bucket="raw", key=f"raw/p/c/v3/{document_id}.pdf",
                       sha256="cd" * 32, size=99, submitted_at=12.0)


def failed_letter(document_id: str, **over) -> DeadLetter:
    """A dead letter as agents/failures.py fail_document builds it (no raw, no key)."""
    fields = dict(document_id=document_id, version=3, stage="normalize", source_topic=UPLOADS.name,
                  error="normalize: ConnectError: S3 unreachable", attempts=3,
                  payload=upload(document_id).asdict(), at=time.time())
    fields.update(over)
    return DeadLetter(**fields)


def entry(letter, partition=0, offset=0) -> DeadLetterEntry:
    return DeadLetterEntry(partition, offset, 0, None, letter)


# --- the record, no stack -------------------------------------------------------------

def test_existing_producers_keep_working():
    letter = failed_letter("d1")
    assert (letter.reason_code, letter.raw, letter.key, letter.schema_version) == ("failed", None, None, 1)
    assert letter.original_key() == b"d1" and letter.raw_bytes() is None
    old = orjson.loads(letter.dumps())
    for name in ("raw", "key", "reason_code"):  # a dead letter written before these fields
        old.pop(name)
    assert decode_event(DeadLetter, orjson.dumps(old)) == letter


def test_poison_dead_letter_keeps_bytes_key_and_salvages_identity():
    raw = b'{"document_id": "doc-9", "version": 4, "size": "big"'  # truncated JSON
    letter = undecodable_dead_letter(stage="normalize", source_topic=UPLOADS.name, key=b"k-9",
                                     raw=raw, reason="not JSON: unexpected end of data", at=5.0)
    back = decode_event(DeadLetter, letter.dumps())
    assert back.raw_bytes() == raw and back.original_key() == b"k-9"
    assert (back.reason_code, back.document_id, back.version, back.payload) == ("undecodable", "k-9", 0, {})
    shaped = undecodable_dead_letter(stage="chunk", source_topic="t", key=None,
                                     raw=b'{"document_id": "doc-9", "version": 4}', reason="missing field(s) x")
    assert (shaped.document_id, shaped.version, shaped.key) == ("doc-9", 4, None)
    empty = undecodable_dead_letter(stage="chunk", source_topic="t", key=None, raw=None, reason="empty value")
    assert (empty.raw, empty.document_id) == (None, "")


def test_redrive_plans():
    payload_plan = plan_redrive(entry(failed_letter("d2")))
    assert (payload_plan.topic, payload_plan.key, payload_plan.source) == (UPLOADS.name, b"d2", "payload")
    assert decode_event(UploadEvent, payload_plan.value) == upload("d2")
    with pytest.raises(RedriveError, match="not in the topic catalogue"):
        plan_redrive(entry(failed_letter("d3", source_topic="elsewhere")))
    with pytest.raises(RedriveError, match=r"payload is not a valid UploadEvent: missing field\(s\) version"):
        plan_redrive(entry(failed_letter("d4", payload={"document_id": "d4"})))
    with pytest.raises(RedriveError, match="not a dead letter"):
        plan_redrive(DeadLetterEntry(1, 7, 0, None, None, "not a dead letter: empty value"))


def test_select_and_since():
    a, b, c = (entry(failed_letter("x", at=100.0), 0, 5), entry(failed_letter("y", stage="chunk", at=200.0), 1, 5),
               entry(failed_letter("y", at=300.0), 1, 6))
    entries = [a, b, c]
    assert select(entries, offsets=["1:5"]) == [b]
    assert select(entries, offsets=["6"]) == [c]
    with pytest.raises(ValueError, match="in partitions 0, 1"):
        select(entries, offsets=["5"])
    with pytest.raises(ValueError, match="no dead letter at offset 2:5"):
        select(entries, offsets=["2:5"])
    assert select(entries, stage="normalize", document="y") == [c]
    assert select(entries, since=250.0) == [c]
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_since("1970-01-01T00:10:00+00:00") == 600.0
    with pytest.raises(ValueError):
        parse_since("yesterday")


# --- the CLI against the broker ---------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(RAGSTREAM), "dlq", *args], capture_output=True, text=True, timeout=120,
                          env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    return proc


async def _produce_dead_letters(bootstrap: str, letters: list[DeadLetter]) -> None:
    from streams.kafka_io import producer, send_record

    async with producer(bootstrap) as prod:
        for letter in letters:
            await send_record(prod, DEAD_LETTERS, letter.document_id or "poison", letter)


async def _read_keyed(bootstrap: str, topic: str, keys: set[bytes], timeout_s: float = 30.0) -> dict:
    """{key: [values]} of ``topic``'s records with those keys, read with a plain consumer
    from the beginning until every key was seen and the end offsets are reached."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    found: dict[bytes, list[bytes]] = {}
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for messages in (await consumer.getmany(timeout_ms=500)).values():
                for msg in messages:
                    if msg.key in keys:
                        found.setdefault(msg.key, []).append(msg.value)
            assignment = consumer.assignment()
            if keys <= found.keys() and assignment:
                ends = await broker_quirks.end_offsets(bootstrap, list(assignment))
                if all([await consumer.position(tp) >= ends[tp] for tp in assignment]):
                    return found
        raise AssertionError(f"keys {keys - found.keys()} not on {topic} within {timeout_s} s")
    finally:
        await consumer.stop()


def _first_column(table: str) -> list[str]:
    """The non-empty first-column cells of a rich table's body rows, top to bottom
    (a wrapped row continues on lines whose first cell is blank)."""
    cells = [line.strip().strip("│").split("│")[0].strip() for line in table.splitlines()
             if line.startswith("│")]
    return [cell for cell in cells if cell]


def test_first_column_reads_ids_not_timestamps():
    table = ("┃ offset ┃ time           ┃\n"
             "│ 2:2    │ 12-03T00:23:17 │\n"
             "│        │ (wrapped)      │\n")
    assert _first_column(table) == ["2:2"]


def test_list_and_redrive(stack):
    bootstrap = stack.kafka_bootstrap
    tag = uuid.uuid4().hex[:8]
    doc = f"doc-{tag}"
    poison_raw = b"\x00poison " + tag.encode() + b" {not json"
    poison_key = f"key-{tag}".encode()
    failed = failed_letter(doc)
    poison = undecodable_dead_letter(stage="normalize", source_topic=UPLOADS.name, key=poison_key,
                                     raw=poison_raw, reason="not JSON: unexpected character")
    run(_produce_dead_letters(bootstrap, [failed, poison]))

    listed = [json.loads(line) for line in cli("list", "--json").stdout.splitlines()]
    mine = {row["reason_code"]: row for row in listed if row.get("document_id") == doc
            or row.get("key") == poison_key.decode()}
    assert set(mine) == {"failed", "undecodable"}
    assert mine["failed"]["error"] == failed.error and mine["failed"]["version"] == 3
    assert mine["failed"]["source_topic"] == UPLOADS.name and mine["failed"]["stage"] == "normalize"
    assert mine["undecodable"]["error"] == "not JSON: unexpected character"
    assert mine["undecodable"]["document_id"] == poison_key.decode()
    # filters: both letters are among the normalize ones of the last minute, and every
    # row listed matches the filters (the session worker may dead-letter others
    # meanwhile, so the test does not assume the two are the only or newest ones)
    recent = [json.loads(line) for line in cli("list", "--json", "--stage", "normalize", "--since", "1m",
                                               "--limit", "500").stdout.splitlines()]
    assert {mine["failed"]["id"], mine["undecodable"]["id"]} <= {r["id"] for r in recent}
    assert all(r.get("stage") == "normalize" for r in recent), recent
    limited = cli("list", "--json", "--stage", "normalize", "--limit", "1").stdout.splitlines()
    assert len(limited) == 1
    table = cli("list", "--document", doc).stdout
    # ids are "partition:offset", short enough to occur inside a timestamp ("00:23:17"
    # holds "3:1"), so compare the table's offset column, not its text
    assert _first_column(table) == [mine["failed"]["id"]], table
    assert "S3 unreachable" in table



def test_redrive_sends_original_bytes(stack):
    bootstrap = stack.kafka_bootstrap
    tag = uuid.uuid4().hex[:8]
    doc = f"doc-{tag}"
    poison_raw = b"\x00poison " + tag.encode() + b" {not json"
    poison_key = f"key-{tag}".encode()
    run(_produce_dead_letters(bootstrap, [
        failed_letter(doc),
        undecodable_dead_letter(stage="normalize", source_topic=UPLOADS.name, key=poison_key,
                                raw=poison_raw, reason="not JSON: unexpected character")]))
    listed = [json.loads(line) for line in cli("list", "--json").stdout.splitlines()]
    poison_id = next(r["id"] for r in listed if r.get("key") == poison_key.decode())
    failed_id = next(r["id"] for r in listed if r.get("document_id") == doc)

    cli("redrive", "--offset", poison_id, "--dry-run")
    out = cli("redrive", "--offset", poison_id, "--offset", failed_id, "--json").stdout
    sent = {row["id"]: row for row in map(json.loads, out.splitlines())}
    assert sent[poison_id]["source"] == "raw" and sent[poison_id]["topic"] == UPLOADS.name
    assert sent[failed_id]["source"] == "payload" and sent[failed_id]["sent"]

    found = run(_read_keyed(bootstrap, UPLOADS.name, {poison_key, doc.encode()}))
    assert found[poison_key] == [poison_raw]  # once: the dry run sent nothing
    assert [decode_event(UploadEvent, v) for v in found[doc.encode()]] == [upload(doc)]
