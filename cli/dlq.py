"""``ragstream dlq ...``: inspect the dead-letter topic and re-send dead letters.

    ragstream dlq list [--stage S] [--document ID] [--since 2h|2025-01-31T12:00] [--limit N] [--json]
    ragstream dlq redrive [--stage S] [--document ID] [--offset P:N ...] [--all] [--dry-run] [--json]

``list`` reads the whole dead-letter topic (from the beginning up to its current end,
no consumer group, nothing committed) and prints one row per dead letter: its id
``partition:offset``, time, stage, source topic, document id, version, kind
(``failed``/``undecodable``) and error. A record on the topic that is not a valid
DeadLetter is listed too, with why.

``redrive`` re-sends each selected dead letter's original message to its source topic
with its original key: the original bytes when the dead letter kept them (``raw``,
always for undecodable records), else the ``payload`` dict validated and serialised
as the source topic's record. It needs a selector (``--stage``, ``--document``,
``--offset``) or ``--all`` (which skips records that are not dead letters unless
named by ``--offset``); nothing is sent when any selected dead letter cannot be
re-sent (unknown source topic, payload not a valid record), so a redrive is all or
nothing. The dead-letter topic is append-only: a redriven dead letter stays listed.

Re-driving the same dead letter twice sends the message twice; that duplicates no
work downstream, because delivery is at-least-once and every sink is idempotent
(deterministic object keys and chunk ids, Milvus upserts, a status projection that
only moves forward). A version that already ended FAILED keeps that one outcome:
re-driving its events does not revive it (re-ingest the file to make a new version).
Redrive is for messages whose version never got an outcome: undecodable (poison)
records once a consumer can read them, and dead letters of stages that do not fail
documents.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import typer
from rich.console import Console
from rich.table import Table

from schemas import DeadLetter, UndecodableRecord, decode_event
from schemas.decode import record_from_dict
from topics import ALL, DEAD_LETTERS

dlq_app = typer.Typer(help="The dead-letter topic: list dead letters, re-send their original messages.",
                      no_args_is_help=True)

READ_TIMEOUT_S = 30.0  # reading the whole dead-letter topic
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class RedriveError(ValueError):
    """A selected dead letter cannot be re-sent (``str(exc)`` says which and why)."""


@dataclass(frozen=True)
class DeadLetterEntry:
    """One record of the dead-letter topic: where it is, and the DeadLetter it holds
    (``letter``), or why it is not one (``problem``). ``timestamp_ms`` is the broker
    record's timestamp (ms since the epoch)."""

    partition: int
    offset: int
    timestamp_ms: int
    message_key: Optional[bytes]
    letter: Optional[DeadLetter]
    problem: Optional[str] = None

    @property
    def id(self) -> str:
        """``partition:offset``, what ``--offset`` takes."""
        return f"{self.partition}:{self.offset}"

    @property
    def at(self) -> float:
        """Unix time in seconds: the dead letter's own ``at``, else the record's timestamp."""
        return self.letter.at if self.letter else self.timestamp_ms / 1000

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON-able dict: id, partition, offset, time (ISO 8601, UTC)
        and every DeadLetter field (or ``problem`` for a record that is not one)."""
        out: dict[str, Any] = {"id": self.id, "partition": self.partition, "offset": self.offset,
                               "time": _iso(self.at, utc=True)}
        if self.letter is None:
            out["problem"] = self.problem
            out["key"] = self.message_key.decode("utf-8", "replace") if self.message_key else None
        else:
            out.update(self.letter.asdict())
        return out


@dataclass
class Redrive:
    """One message to re-send: ``value`` bytes to ``topic`` under ``key``; ``source`` is
    ``"raw"`` (the original bytes) or ``"payload"`` (re-serialised); ``sent`` is the
    (partition, offset) it got, None until sent or in a dry run."""

    entry: DeadLetterEntry
    topic: str
    key: bytes
    value: bytes
    source: str
    sent: Optional[tuple[int, int]] = None

    def to_json(self) -> dict[str, Any]:
        """id, document_id, version, topic, key, source, bytes, sent (``"P:N"`` or null)."""
        letter = self.entry.letter
        return {"id": self.entry.id, "document_id": letter.document_id if letter else None,
                "version": letter.version if letter else None, "topic": self.topic,
                "key": self.key.decode("utf-8", "replace"), "source": self.source,
                "bytes": len(self.value), "sent": f"{self.sent[0]}:{self.sent[1]}" if self.sent else None}


async def read_dead_letters(bootstrap: str, *, timeout_s: float = READ_TIMEOUT_S) -> list[DeadLetterEntry]:
    """Every record now on the dead-letter topic, decoded, ordered by time."""
    from streams.kafka_io import read_topic

    entries = []
    async for msg in read_topic(bootstrap, DEAD_LETTERS.name, timeout_s=timeout_s):
        try:
            letter, problem = decode_event(DeadLetter, msg.value), None
        except UndecodableRecord as exc:
            letter, problem = None, f"not a dead letter: {exc.reason}"
        entries.append(DeadLetterEntry(msg.partition, msg.offset, msg.timestamp, msg.key, letter, problem))
    entries.sort(key=lambda e: (e.at, e.partition, e.offset))
    return entries


def parse_since(text: str, *, now: Optional[float] = None) -> float:
    """``--since`` → Unix seconds: a duration back from now (``90s``, ``30m``, ``2h``,
    ``1d``, ``1w``) or an ISO 8601 date/time (no zone: local time).

    Raises ValueError for anything else.
    """
    match = _DURATION.match(text)
    if match:
        return (time.time() if now is None else now) - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        return dt.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise ValueError(f"--since {text!r}: expected a duration like 30m, 2h, 1d or an ISO date/time") from None


def select(entries: Sequence[DeadLetterEntry], *, stage: Optional[str] = None,
           document: Optional[str] = None, since: Optional[float] = None,
           offsets: Sequence[str] = ()) -> list[DeadLetterEntry]:
    """The entries matching every filter given (None/empty: no filter).

    ``offsets`` holds ids ``P:N`` or bare offsets ``N``. Raises ValueError when an
    offset matches no entry, or a bare one matches entries in several partitions.
    """
    chosen = list(entries)
    if offsets:
        ids: set[str] = set()
        for text in offsets:
            matches = [e for e in entries if _offset_matches(text, e)]
            if not matches:
                raise ValueError(f"no dead letter at offset {text}")
            if len(matches) > 1:
                raise ValueError(f"offset {text} is in partitions "
                                 f"{', '.join(str(e.partition) for e in matches)}: give PARTITION:OFFSET")
            ids.add(matches[0].id)
        chosen = [e for e in chosen if e.id in ids]
    if stage is not None:
        chosen = [e for e in chosen if e.letter and e.letter.stage == stage]
    if document is not None:
        chosen = [e for e in chosen if e.letter and e.letter.document_id == document]
    if since is not None:
        chosen = [e for e in chosen if e.at >= since]
    return chosen


def _offset_matches(text: str, entry: DeadLetterEntry) -> bool:
    text = text.strip()
    if ":" in text:
        partition, _, offset = text.partition(":")
        if not (partition.isdigit() and offset.isdigit()):
            raise ValueError(f"--offset {text!r}: expected PARTITION:OFFSET or OFFSET")
        return (entry.partition, entry.offset) == (int(partition), int(offset))
    if not text.isdigit():
        raise ValueError(f"--offset {text!r}: expected PARTITION:OFFSET or OFFSET")
    return entry.offset == int(text)


def plan_redrive(entry: DeadLetterEntry) -> Redrive:
    """The message that re-sends ``entry``'s original event.

    Raises RedriveError when the entry is not a DeadLetter, its source topic is not a
    catalogue input topic, its ``raw`` is not base64, or (without ``raw``) its payload
    is not a valid record of the source topic's type.
    """
    letter = entry.letter
    if letter is None:
        raise RedriveError(f"{entry.id}: {entry.problem}")
    specs = {spec.name: spec for spec in ALL if spec is not DEAD_LETTERS}
    spec = specs.get(letter.source_topic)
    if spec is None:
        raise RedriveError(f"{entry.id}: source topic {letter.source_topic!r} is not in the topic catalogue")
    try:
        raw = letter.raw_bytes()
    except ValueError as exc:
        raise RedriveError(f"{entry.id}: {exc}") from None
    if raw is not None:
        return Redrive(entry, spec.name, letter.original_key(), raw, "raw")
    try:
        record = record_from_dict(spec.value_type, letter.payload)
    except UndecodableRecord as exc:
        raise RedriveError(f"{entry.id}: payload is not a valid {spec.value_type.__name__}: {exc}") from None
    return Redrive(entry, spec.name, letter.original_key(), record.dumps(), "payload")


async def send_redrives(bootstrap: str, plans: Sequence[Redrive]) -> None:
    """Send every planned message in order, waiting for each acknowledgement; sets ``sent``."""
    from streams.kafka_io import producer, send_raw

    async with producer(bootstrap) as prod:
        for plan in plans:
            plan.sent = await send_raw(prod, plan.topic, plan.key, plan.value)


def _iso(ts: float, *, utc: bool = False) -> str:
    when = dt.datetime.fromtimestamp(ts, dt.timezone.utc if utc else None)
    return when.isoformat(timespec="seconds")


def _read_selected(stage, document, since, offsets) -> list[DeadLetterEntry]:
    from streams.settings import get_settings

    try:
        since_ts = parse_since(since) if since else None
        entries = asyncio.run(read_dead_letters(get_settings().kafka_bootstrap))
        return select(entries, stage=stage, document=document, since=since_ts, offsets=offsets or ())
    except (ValueError, KeyError, TimeoutError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)


@dlq_app.command("list")
def list_command(
    stage: Optional[str] = typer.Option(None, "--stage", "-s", help="only this stage's dead letters"),
    document: Optional[str] = typer.Option(None, "--document", "-d", help="only this document id"),
    since: Optional[str] = typer.Option(None, help="only newer: a duration (30m, 2h, 1d) or ISO date/time"),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="only the newest N"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per line"),
) -> None:
    """List dead letters, oldest first (a table, or JSON lines with --json)."""
    entries = _read_selected(stage, document, since, ())
    if limit is not None:
        entries = entries[-limit:]
    if as_json:
        for e in entries:
            typer.echo(json.dumps(e.to_json()))
        return
    table = Table("offset", "time", "stage", "source topic", "document", "version", "kind", "error")
    for e in entries:
        letter = e.letter
        if letter is None:
            table.add_row(e.id, _iso(e.at), "?", "?", "?", "?", "?", e.problem)
            continue
        table.add_row(e.id, _iso(e.at), letter.stage, letter.source_topic, letter.document_id or "?",
                      str(letter.version), letter.reason_code, letter.error)
    console = Console(width=200)
    console.print(table)
    console.print(f"{len(entries)} dead letter(s)")


@dlq_app.command("redrive")
def redrive_command(
    stage: Optional[str] = typer.Option(None, "--stage", "-s", help="the dead letters of this stage"),
    document: Optional[str] = typer.Option(None, "--document", "-d", help="the dead letters of this document"),
    offset: Optional[List[str]] = typer.Option(None, "--offset", "-o",
                                               help="PARTITION:OFFSET (or OFFSET) as listed; repeatable"),
    all_: bool = typer.Option(False, "--all", help="every dead letter (when no other selector)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print what would be sent, send nothing"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per message"),
) -> None:
    """Re-send selected dead letters' original messages to their source topics.

    The original bytes when kept, else the payload as the source topic's record, with
    the original key. Nothing is sent unless every selected one can be. Re-driving twice
    duplicates no work downstream: every sink is idempotent.
    """
    from streams.settings import get_settings

    if not (stage or document or offset or all_):
        typer.echo("error: select dead letters with --stage, --document, --offset, or --all", err=True)
        raise typer.Exit(2)
    entries = _read_selected(stage, document, None, offset)
    if not offset:  # a record that is not a dead letter is re-sent only when named by offset
        entries = [e for e in entries if e.letter is not None]
    if not entries:
        typer.echo("no dead letters match", err=True)
        raise typer.Exit(1)
    plans, errors = [], []
    for e in entries:
        try:
            plans.append(plan_redrive(e))
        except RedriveError as exc:
            errors.append(str(exc))
    if errors:
        for line in errors:
            typer.echo(f"cannot redrive {line}", err=True)
        typer.echo("nothing sent", err=True)
        raise typer.Exit(2)
    if not dry_run:
        asyncio.run(send_redrives(get_settings().kafka_bootstrap, plans))
    if as_json:
        for plan in plans:
            typer.echo(json.dumps(plan.to_json()))
        return
    table = Table("dead letter", "document", "version", "to topic", "key", "value", "sent as")
    for plan in plans:
        row = plan.to_json()
        table.add_row(row["id"], row["document_id"] or "?", str(row["version"]), row["topic"], row["key"],
                      f"{row['source']}, {row['bytes']} bytes", row["sent"] or "dry run")
    console = Console(width=200)
    console.print(table)
    console.print(f"dry run: would send {len(plans)} message(s)" if dry_run else f"sent {len(plans)} message(s)")
