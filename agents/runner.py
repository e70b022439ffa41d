"""The stage runner: every agent is a declaration (:class:`Stage`) plus a work function.

For each event of its source topic the runner

1. decodes the raw bytes (schemas.decode); a poison record goes to the dead-letter
   topic with its reason and the stream moves on (issue 8, failure 8);
2. asks the ledger whether the work is still wanted (``guard``): events of a
   superseded, deleted or already finished version are skipped, and an outcome
   claimed but never announced (a crash in between) is announced now
   (failures 2, 3, 5);
3. runs the work under the one retry policy (agents/retry_policy.py): transient
   errors wait with backoff up to the document deadline, permanent ones fail the
   version (ledger claim, dead letter, FAILED status) without stopping the stream;
4. counts it in the stage metrics.

Batched stages get a list of events (``stream.take_events``); a batch that fails
permanently is retried one document at a time so one bad document fails alone.
Nothing here raises out of the agent except CancelledError (shutdown/rebalance),
so Faust never restarts an agent over one event and never skips an unfinished one.
Each event's work runs in its document version's trace span (streams/tracing.py,
off by default), and a permanent failure of one part of a split document may be
kept as a failed part instead (``Stage.salvage``, partial success).

Size: one runner class; the single-event, batch, containment and failure paths
share its retry, step-marking and failure code, which splitting would export.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Sequence

import faust
from tenacity import RetryCallState

from agents import phases
from agents.context import StageContext, track_sends
from agents.outcomes import announce, fail_version
from agents.retry_policy import classify, retry_transient, stage_retrying
from schemas import DeadLetter
from schemas.dead_letter import undecodable_dead_letter
from schemas.decode import UndecodableRecord, decode_event
from schemas.sealing import SealBroken
from stages.errors import (ConversionTimeout, DependencyUnavailable, DocumentError, InternalError,
                           ParserCrashed)
from streams import tracing
from streams.log_format import log_context, record_fields
from streams.metrics import STAGE_EVENTS, STAGE_SECONDS
from topics.catalogue import TopicSpec

log = logging.getLogger(__name__)

Work = Callable[[StageContext, Any], Awaitable[None]]
BatchWork = Callable[[StageContext, Sequence[Any]], Awaitable[None]]


@dataclass(frozen=True)
class Stage:
    """One stage's declaration.

    ``name``: stage (and agent) name; ``source``: the topic it consumes; ``work``:
    ``async (ctx, record)`` — or ``async (ctx, records)`` when ``batch`` is
    ``(max events, window seconds)``; ``guard``: skip events of versions whose work
    is no longer wanted (off for the status-topic consumers); ``fails_documents``:
    a permanent error fails the event's document version (off for projection and
    notify, whose permanent errors are dead-lettered and never fail a document);
    ``deadline``: transient errors are retried this long (None: the
    ``document_deadline_s`` setting; ``float('inf')``: forever); ``unguarded``:
    records for which the guard is not asked (e.g. delete requests); ``step``:
    the ledger step a record's work completes (``step(record) -> name``): work whose
    step is done is skipped, and the step is marked after the work succeeds, so a
    redelivered event (a worker killed before its offset was committed) is not
    worked on twice.  ``concurrency``: events worked on at once by one process (Faust
    agent concurrency: the actors share one queue, and an offset is committed only
    once every event before it is done); single-event stages only.
    ``salvage``: ``async (ctx, record, failure) -> bool``, asked before a permanent
    failure fails the version: True keeps it as a failed part (agents/partition.py).
    ``lane``: names a second agent of the same stage on another topic (its Faust
    agent is ``{name}-{lane}``; metrics, logs and ledger steps keep ``name``).
    """

    name: str
    source: TopicSpec
    work: Callable[..., Awaitable[None]]
    batch: Optional[tuple[int, float]] = None
    guard: bool = True
    fails_documents: bool = True
    deadline: Optional[float] = None
    unguarded: Optional[Callable[[Any], bool]] = None
    step: Optional[Callable[[Any], str]] = None
    concurrency: int = 1
    salvage: Optional[Callable[[Any, Any, Any], Awaitable[bool]]] = None
    lane: str = ""

    @property
    def agent_name(self) -> str:
        """The Faust agent's name: ``name``, or ``{name}-{lane}`` for a lane agent."""
        return f"{self.name}-{self.lane}" if self.lane else self.name

    def __post_init__(self) -> None:
        if self.concurrency < 1 or (self.batch and self.concurrency != 1):
            raise ValueError(f"{self.name}: concurrency must be 1 for a batched stage, "
                             f"at least 1 otherwise (got {self.concurrency})")

    def unguarded_record(self, record: Any) -> bool:
        """True when the guard (and the step check) is not asked for ``record``."""
        return bool(self.unguarded and self.unguarded(record))


def declare(app: faust.App, ctx: StageContext, stage: Stage) -> None:
    """Register ``stage`` as a Faust agent on ``app``."""
    raw = app.topic(stage.source.name, key_serializer="raw", value_serializer="raw")
    runner = _Runner(ctx, stage)

    if stage.batch:
        size, within = stage.batch

        @app.agent(raw, name=stage.agent_name)
        async def batched(stream: faust.StreamT) -> None:
            async for events in stream.take_events(size, within=within):
                items = [(e.key, e.value) for e in events]
                with tracing.receiving((e.value, e.headers) for e in events):  # streams/tracing.py
                    await runner.contained(runner.handle_batch(items), items)
    else:
        @app.agent(raw, name=stage.agent_name, concurrency=stage.concurrency)
        async def single(stream: faust.StreamT) -> None:
            async for event in stream.events():
                item = (event.key, event.value)
                with tracing.receiving([(event.value, event.headers)]):
                    await runner.contained(runner.handle_one(*item), [item])


class _Runner:
    def __init__(self, ctx: StageContext, stage: Stage):
        self.ctx, self.stage = ctx, stage
        deadline = stage.deadline if stage.deadline is not None else ctx.settings.document_deadline_s
        self.deadline = None if deadline == float("inf") else deadline

    # -- containment ----------------------------------------------------------------
    async def contained(self, handling: Awaitable[None],
                        items: Sequence[tuple[Optional[bytes], Optional[bytes]]]) -> None:
        """Await ``handling`` of ``items`` (raw key/value pairs); an exception that
        escapes it — a ledger write or announcement failing permanently, a bug — does
        not crash the agent (Faust would restart it and move past the event, losing
        it silently): it is logged and each item goes to the dead-letter topic with
        the error, where ``ragstream dlq redrive`` can send it back.  CancelledError
        propagates."""
        try:
            await handling
        except Exception as exc:  # noqa: BLE001 — contained: dead-lettered below
            STAGE_EVENTS.labels(self.stage.name, "runner_error").inc()
            log.exception("%s: handling failed outside the retry policy; dead-lettering %d record(s)",
                          self.stage.name, len(items))
            error = f"runner error in the {self.stage.name} stage: {type(exc).__name__}: {exc}"
            for key, value in items:
                try:
                    record = decode_event(self.stage.source.value_type, value)
                except UndecodableRecord:
                    continue  # handle_* dead-lettered it already
                try:
                    await self.deliver(lambda r=record: self.ctx.topics.dead_letters.send(
                        key=r.document_id, value=DeadLetter(
                            document_id=r.document_id, version=r.version, stage=self.stage.name,
                            source_topic=self.stage.source.name, error=error, attempts=1,
                            payload=r.asdict(), at=time.time())))
                except Exception:  # noqa: BLE001 — the dead-letter topic refused it too
                    log.exception("%s: could not dead-letter %s v%s", self.stage.name,
                                  getattr(record, "document_id", "?"), getattr(record, "version", "?"))

    # -- decoding -------------------------------------------------------------------
    async def decode(self, key: Optional[bytes], value: Optional[bytes]) -> Any:
        """The record with its sealed content opened (schemas/sealing.py); None after
        dead-lettering a poison one (also one whose seal does not open), and None for
        a record of a deleted version whose key was destroyed, unless the stage works
        on such records (the status consumers, delete requests): those get it with
        its content blank."""
        try:
            record, shredded = decode_event(self.stage.source.value_type, value), False
            if getattr(record, "sealed", None):  # records written before sealing: as they are
                record, shredded = await self.forever(lambda: self.ctx.open(record))
        except (UndecodableRecord, SealBroken) as exc:
            STAGE_EVENTS.labels(self.stage.name, "undecodable").inc()
            log.warning("%s: undecodable record (key %r) dead-lettered: %s", self.stage.name, key, exc)
            await self.deliver(lambda: self.ctx.topics.dead_letters.send(
                key=(key or b"").decode("utf-8", "replace"),
                value=undecodable_dead_letter(stage=self.stage.name,
                                              source_topic=self.stage.source.name, key=key,
                                              raw=value, reason=f"undecodable: {exc}")))
            return None
        if shredded and self.stage.guard and not self.stage.unguarded_record(record):
            STAGE_EVENTS.labels(self.stage.name, "skipped").inc()
            log.info("%s: skip %s v%s (deleted: its data key is destroyed)", self.stage.name,
                     record.document_id, record.version)
            return None
        return record

    # -- the guard ------------------------------------------------------------------
    async def wanted(self, record: Any) -> bool:
        """False when the record's version must not be worked on (and heal an
        unannounced outcome on the way)."""
        if not self.stage.guard or self.stage.unguarded_record(record):
            return True
        ledger = (await self.ctx.resources.metadata()).ledger
        state = await ledger.state(record.document_id, record.version)
        reason = state.skip_reason
        if reason is None:
            return True
        if state.outcome is not None and not state.outcome.announced and not state.deleted \
                and not state.superseded:
            await announce(self.ctx, record, state.outcome, stage=self.stage.name)
        STAGE_EVENTS.labels(self.stage.name, "skipped").inc()
        log.info("%s: skip %s v%s (%s)", self.stage.name, record.document_id, record.version, reason)
        return False

    # -- retries --------------------------------------------------------------------
    async def forever(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()`` retried while it fails transiently, without a deadline (ledger
        writes, dead letters and status events must not be lost); any other error
        raises at once (agents/retry_policy.retry_transient)."""
        return await retry_transient(call, describe=self.stage.name)

    async def stored(self, call: Callable[[], Awaitable[Any]],
                     after: Optional[Callable[[], Awaitable[None]]] = None) -> Any:
        """``call()``, then wait until the broker stored every record it sent
        (``track_sends`` before, ``ctx.delivered`` after: RecordsNotStored if not),
        then ``after()`` — a ledger marker that must only be written over stored
        records (the step's ``mark_step``)."""
        track_sends()
        since = time.perf_counter()
        result = await call()
        since = phases.add("work", since)
        await self.ctx.delivered()
        since = phases.add("stored", since)
        if after is not None:
            await after()
            phases.add("marked", since)
        return result

    async def deliver(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """:meth:`forever` for a ``call()`` that sends records (a dead letter, a
        failure's events): each try is :meth:`stored`, so the offset is never
        committed over a lost record."""
        return await self.forever(lambda: self.stored(call))

    async def attempt(self, call: Callable[[], Awaitable[None]], *, deadline: Optional[float],
                      after: Optional[Callable[[], Awaitable[None]]] = None
                      ) -> tuple[Optional[BaseException], int]:
        """Run ``call()`` under the retry policy (agents/retry_policy.stage_retrying),
        each try :meth:`stored` with ``after``; returns (None, attempts) on success,
        (the error that ends it, attempts) otherwise: a transient error at the
        deadline becomes "timeout after N s".  CancelledError propagates."""
        def log_retry(rs: RetryCallState) -> None:
            exc = rs.outcome.exception()
            STAGE_EVENTS.labels(self.stage.name, "retried").inc()
            log.warning("%s: attempt %d failed (%s: %s); retrying in %.1f s",
                        self.stage.name, rs.attempt_number, type(exc).__name__, exc, rs.upcoming_sleep)

        retrying = stage_retrying(deadline, before_sleep=log_retry)
        try:
            async for attempt in retrying:
                with attempt:
                    await self.stored(call, after)  # its output stored, or retried
        except Exception as exc:  # noqa: BLE001 — what ended the retries; CancelledError is not one
            if classify(exc) == "transient":  # only the deadline stops a transient error
                elapsed = retrying.statistics.get("delay_since_first_attempt", 0.0)
                exc = _DeadlineExceeded(
                    f"timeout after {elapsed:.0f} s: a service the "
                    f"{self.stage.name} stage needs stayed unavailable",
                    detail=f"last error: {type(exc).__name__}: {exc}")
            return exc, retrying.statistics.get("attempt_number", 1)
        return None, retrying.statistics.get("attempt_number", 1)

    # -- one event ------------------------------------------------------------------
    async def handle_one(self, key: Optional[bytes], value: Optional[bytes]) -> None:
        """Decode, guard, work, and fail the version when the work cannot succeed;
        every line logged meanwhile carries the record's ids (streams/log_format.py)."""
        with log_context(stage=self.stage.name):
            opened = phases.begin()
            record = await self.decode(key, value)
            phases.add("open", opened)
            if record is None:
                return
            with log_context(**record_fields(record)), tracing.stage_spans(self.stage.name, [(record, value)]):
                await self.work_one(record)

    async def work_one(self, record: Any) -> None:
        """:meth:`handle_one` for a decoded ``record``."""
        started = time.perf_counter()
        if not await self.forever(lambda: self.wanted(record)):
            return
        mark_step = None
        if self.stage.step and not self.stage.unguarded_record(record):
            step = self.stage.step(record)
            ledger = (await self.ctx.resources.metadata()).ledger
            if await self.forever(lambda: ledger.step_done(record.document_id, record.version, step)):
                STAGE_EVENTS.labels(self.stage.name, "skipped").inc()
                return

            async def mark_step() -> None:  # after the step's records are stored
                await ledger.mark_step(record.document_id, record.version, step)
        phases.add("guard", started)
        error, attempts = await self.attempt(lambda: self.stage.work(self.ctx, record),
                                             deadline=self.deadline, after=mark_step)
        if error is None:
            self.log_done([record], started)
        await self.finish(record, error, attempts, started)

    def log_done(self, records: Sequence[Any], started: float) -> None:
        """One info line per document version in ``records`` whose work succeeded,
        with its ids (the JSON log's per-stage trail of a document)."""
        elapsed = time.perf_counter() - started
        spent = phases.summary()  # where the time went (agents/phases.py)
        for group in _by_version(records):
            with log_context(**record_fields(group[0])):
                log.info("%s: done for %s v%s (%d record(s)) in %.2f s%s", self.stage.name,
                         group[0].document_id, group[0].version, len(group), elapsed,
                         f" ({spent})" if spent else "")

    async def finish(self, record: Any, error: Optional[BaseException], attempts: int,
                     started: float) -> None:
        """Metrics for a success; the failure path for an error (``attempts``: how
        many times the work ran)."""
        if error is None:
            elapsed = time.perf_counter() - started
            STAGE_EVENTS.labels(self.stage.name, "ok").inc()
            STAGE_SECONDS.labels(self.stage.name).observe(elapsed)
            return
        STAGE_EVENTS.labels(self.stage.name, "failed").inc()
        failure = failure_of(error, self.stage.name)
        tracing.mark_failed(record, failure.code, failure.reason)
        doc, ver = getattr(record, "document_id", "?"), getattr(record, "version", "?")
        if not isinstance(error, DocumentError):
            log.error("%s failed for %s v%s [%s]: %s", self.stage.name, doc, ver, failure.code,
                      failure.detail, exc_info=error)
        else:  # the reason and detail may quote the document (a parser's message): not logged
            log.warning("%s failed for %s v%s [%s] (%s; the reason is in its status)", self.stage.name,
                        doc, ver, failure.code, error_kind(failure))
        internal = failure.reason + (f" ({failure.detail})" if failure.detail else "")
        if (keep := self.stage.salvage) and await self.deliver(lambda: keep(self.ctx, record, failure)):
            log.warning("%s: %s v%s goes on without this part [%s]", self.stage.name, doc, ver, failure.code)
            return STAGE_EVENTS.labels(self.stage.name, "salvaged").inc()
        if not self.stage.fails_documents:
            await self.deliver(lambda: self.ctx.topics.dead_letters.send(
                key=record.document_id, value=DeadLetter(
                    document_id=record.document_id, version=record.version, stage=self.stage.name,
                    source_topic=self.stage.source.name, error=internal, attempts=attempts,
                    payload=record.asdict(), at=time.time())))
            return
        await self.deliver(lambda: fail_version(
            self.ctx, record, stage=self.stage.name, source_topic=self.stage.source.name,
            error=failure.reason, code=failure.code, detail=failure.detail,
            attempts=attempts, payload=record.asdict()))

    # -- a batch --------------------------------------------------------------------
    async def handle_batch(self, items: Sequence[tuple[Optional[bytes], Optional[bytes]]]) -> None:
        """Decode and guard each event, run the batch, and on a permanent failure run
        it again one document version at a time (log lines carry the stage, and the
        document's ids where one document is worked on)."""
        with log_context(stage=self.stage.name):
            await self.work_batch(items)

    async def work_batch(self, items: Sequence[tuple[Optional[bytes], Optional[bytes]]]) -> None:
        """:meth:`handle_batch` inside its log context."""
        opened = phases.begin()
        decoded = [(await self.decode(k, v), v) for k, v in items]
        phases.add("open", opened)
        with tracing.stage_spans(self.stage.name, [(r, v) for r, v in decoded if r is not None]):
            await self.work_records([r for r, _ in decoded if r is not None])

    async def work_records(self, records: list[Any]) -> None:
        """:meth:`work_batch` for the decoded records, inside their spans."""
        started = time.perf_counter()
        wanted: dict[tuple[str, int], bool] = {}
        for r in records:
            ref = (r.document_id, r.version)
            if ref not in wanted:
                wanted[ref] = await self.forever(lambda r=r: self.wanted(r))
        records = [r for r in records if wanted[(r.document_id, r.version)]]
        if not records:
            return
        phases.add("guard", started)
        error, attempts = await self.attempt(lambda: self.stage.work(self.ctx, records),
                                             deadline=self.deadline)
        if error is None:
            self.log_done(records, started)
            await self.finish(records[0], None, attempts, started)
            return
        if isinstance(error, _DeadlineExceeded):  # a dependency stayed away too long
            for group in _by_version(records):
                with log_context(**record_fields(group[0])):
                    await self.finish(group[0], error, attempts, started)
            return
        log.warning("%s: batch of %d failed (%s); retrying per document", self.stage.name,
                    len(records), error_kind(error) if isinstance(error, DocumentError)
                    else f"{type(error).__name__}: {error}")
        for group in _by_version(records):
            with log_context(**record_fields(group[0])):
                err, n = await self.attempt(lambda g=group: self.stage.work(self.ctx, g),
                                            deadline=self.deadline)
                if err is None:
                    self.log_done(group, started)
                await self.finish(group[0], err, n, started)


class _DeadlineExceeded(DependencyUnavailable):
    """Transient errors lasted past the document deadline."""


def _by_version(records: Sequence[Any]) -> list[list[Any]]:
    """``records`` grouped by (document, version), in first-seen order."""
    groups: dict[tuple[str, int], list[Any]] = {}
    for r in records:
        groups.setdefault((r.document_id, r.version), []).append(r)
    return list(groups.values())


def failure_of(exc: BaseException, stage: str) -> DocumentError:
    """The DocumentError a failed work call ends its version with: a DocumentError
    itself; StageTimeout → ``timeout``; WorkerCrashed → ``parser_crashed``; anything
    else → ``internal`` with the sentence "internal error in the <stage> stage" and the
    exception's ``Type: message`` only in ``detail`` (the log, the dead letter)."""
    if isinstance(exc, DocumentError):
        return exc
    from stages.pool import StageTimeout, WorkerCrashed

    if isinstance(exc, StageTimeout):
        return ConversionTimeout(f"{stage}: {exc}", permanent=True)
    if isinstance(exc, WorkerCrashed):
        return ParserCrashed(f"{stage}: {exc}")
    return InternalError(f"internal error in the {stage} stage (details in the worker log)",
                         detail=f"{type(exc).__name__}: {exc}"[:500])


def error_kind(failure: DocumentError) -> str:
    """What a log line may say of a document's failure: the class of the error (and
    of the library exception in its ``detail``, e.g. ``XMLSyntaxError``), never its
    message, which can quote the document (a tag name, a cell)."""
    inner = (failure.detail or "").partition(":")[0].strip()
    return type(failure).__name__ + (f" from {inner}" if inner.isidentifier() else "")


def reason_of(exc: BaseException, stage: str) -> str:
    """The human sentence of :func:`failure_of` (never raw exception text)."""
    return failure_of(exc, stage).reason
