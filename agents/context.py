"""What a stage worker's agent shares: topics, clients, settings, status emitter."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

import faust

from adapters.document_keys import DocumentKeys
from schemas import DocumentStatus, status_event
from streams.bound_topics import BoundTopics, bind_topics
from streams.resources import Resources
from streams.settings import Settings
from streams import tracing

log = logging.getLogger(__name__)


# the futures of the records the current event's work sent (one list per attempt:
# agents/runner.py calls track_sends first; tasks the work starts share the list)
_SENT: ContextVar[Optional[list]] = ContextVar("ragstream_sent", default=None)
DELIVERY_WAIT_S = 60.0  # after a flush, how long a send's future may still take to settle


class RecordsNotStored(ConnectionError):
    """The broker did not store records this stage sent: a produce request failed for
    good (seen: ``UnknownError`` while the embedded broker's object store restarted,
    a 30-document restart-s3 drill, 2026-12-02).  A ConnectionError, so transient:
    the runner retries the work, which sends the records again (sinks are
    idempotent), instead of committing an event whose output was lost."""


def track_sends() -> None:
    """Start a fresh list of the sends of the current task (and of tasks it starts
    from now on); :meth:`StageContext.delivered` checks and clears it."""
    _SENT.set([])


class TrackedTopic:
    """A bound Faust topic whose ``send`` seals the record's document content with
    its version's data key (``seal``: adapters/document_keys.DocumentKeys.seal; None:
    sent as it is) and remembers the returned future (the broker's acknowledgement)
    for :meth:`StageContext.delivered`; anything else is the topic's."""

    def __init__(self, topic: faust.TopicT,
                 seal: Optional[Callable[[Any], Awaitable[Any]]] = None):
        self._topic = topic
        self._seal = seal

    def __getattr__(self, name: str) -> Any:
        return getattr(self._topic, name)

    async def send(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["headers"] = tracing.headers_for(kwargs.get("value"), kwargs.get("headers"))
        if self._seal is not None and isinstance(kwargs.get("value"), faust.Record):
            kwargs["value"] = await self._seal(kwargs["value"])
        fut = await self._topic.send(*args, **kwargs)
        sent = _SENT.get()
        if sent is None:
            sent = []
            _SENT.set(sent)
        sent.append(fut)
        return fut


def tracked(topics: BoundTopics,
            seal: Optional[Callable[[Any], Awaitable[Any]]] = None) -> BoundTopics:
    """``topics`` with every topic wrapped in :class:`TrackedTopic` (each send
    sealed with ``seal`` when given)."""
    return BoundTopics(**{f.name: TrackedTopic(getattr(topics, f.name), seal)
                          for f in dataclasses.fields(topics)})


@dataclass
class StageContext:
    """Shared by the agent of one app; ``resources`` opens clients lazily."""

    app: faust.App
    settings: Settings
    topics: BoundTopics
    resources: Resources
    _partitions: dict[str, int] = field(default_factory=dict)
    _keys: Optional[DocumentKeys] = None
    # a stage's own shutdown steps (notify: release its callback leases), run in order
    # before its clients close, in the one shutdown receiver below: two receivers of
    # the signal would run in no fixed order (Faust keeps them in a set)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @classmethod
    def for_app(cls, app: faust.App, settings: Settings,
                pool_workers: Optional[int] = None,
                pool_preload: bool = False, bulk_workers: int = 0) -> "StageContext":
        """The context of ``app``'s stage; ``pool_workers``: processes of its
        blocking-work pools (None: the ``stage_workers`` setting), ``bulk_workers`` of
        them niced for bulk-lane work (streams/resources.py); ``pool_preload``:
        its processes fork from a server that has loaded the parsers (stages/pool.py),
        and the pool starts with the app instead of on the first task."""
        ctx = cls(app, settings, bind_topics(app), Resources(settings, pool_workers, pool_preload,
                                                           bulk_workers))
        ctx.topics = tracked(ctx.topics, ctx.seal)

        if pool_preload:
            @app.task
            async def _start_pool() -> None:
                try:
                    for pool in ctx.resources.pools():
                        await pool.start()
                except Exception:  # noqa: BLE001 - the first task starts the pool instead
                    log.warning("starting the blocking-work pool early failed", exc_info=True)

        @app.on_before_shutdown.connect  # the stage's closers, then clients and the process pool
        async def _close(sender, **kwargs) -> None:  # noqa: ARG001
            for closer in ctx.closers:
                await closer()
            await ctx.resources.close()

        return ctx

    async def document_keys(self) -> DocumentKeys:
        """The data keys of document versions (adapters/document_keys.py), over the
        metadata pool; one per context, so its key cache is shared by the stage."""
        if self._keys is None:
            self._keys = DocumentKeys((await self.resources.metadata()).pool)
        return self._keys

    async def seal(self, record: Any) -> Any:
        """``record`` with its document content sealed (every send of the stage's
        topics goes through this: :class:`TrackedTopic`)."""
        return await (await self.document_keys()).seal(record)

    async def open(self, record: Any) -> tuple[Any, bool]:
        """(``record`` opened, False), or (its content blank, True) when its version's
        key was destroyed by a delete (adapters/document_keys.DocumentKeys.open)."""
        if not getattr(record, "sealed", None):
            return record, False
        return await (await self.document_keys()).open(record)

    async def emit(self, ref, status: DocumentStatus, *, stage: str, chunks_total: int = 0,
                   chunks_done: int = 0, pages: int = 0, error: Optional[str] = None,
                   error_code: Optional[str] = None, at: Optional[float] = None,
                   failed_parts: Optional[list] = None) -> None:
        """Send one status transition for the document version ``ref`` names
        (``error``: the human sentence; ``error_code``: its stages.errors code;
        ``at``: the event's time in Unix seconds, now by default; ``failed_parts``:
        a partial COMPLETED's missing parts)."""
        await self.topics.status.send(key=ref.document_id, value=status_event(
            ref.document_id, ref.version, status, stage=stage, project=ref.project,
            filename=ref.filename, chunks_total=chunks_total, chunks_done=chunks_done,
            pages=pages, error=error, error_code=error_code, at=at, failed_parts=failed_parts,
            callback_url=getattr(ref, "callback_url", None)))

    async def delivered(self) -> None:
        """Wait until every record this process has sent so far is acknowledged by
        the broker.

        Faust's ``topic.send()`` returns once the record is queued in the producer
        (aiokafka's accumulator), not once it is stored.  A ledger marker that says
        "this step's records were sent" (``mark_step``, ``mark_announced``,
        ``mark_queued``) must be written after this, or a worker killed in between
        loses the records while the marker makes the redelivered event skip the
        work: the version then never finishes (seen in the kill-workers drill).
        Shown by tests/test_broker_quirks.py::test_send_returns_before_delivery.
        A record the broker did not store (its produce request failed for good) is
        not only logged: this raises :class:`RecordsNotStored` for the sends of the
        current work (:func:`track_sends`), so the work is retried and nothing is
        marked or committed as done over a lost record.
        """
        await self.app.producer.flush()
        sent = _SENT.get()
        if not sent:
            return
        futures = [f for f in sent if isinstance(f, asyncio.Future)]
        sent.clear()
        if not futures:
            return
        done, pending = await asyncio.wait(futures, timeout=DELIVERY_WAIT_S)
        failed = [f.exception() for f in done if not f.cancelled() and f.exception() is not None]
        if failed or pending:
            first = failed[0] if failed else None
            raise RecordsNotStored(
                f"{len(failed) + len(pending)} of {len(futures)} records not stored by the broker"
                + (f" (first: {type(first).__name__}: {first})" if first is not None
                   else f" (no acknowledgement in {DELIVERY_WAIT_S:.0f} s)"))

    async def partition_count(self, topic: faust.TopicT) -> int:
        """Partitions of ``topic`` as the broker reports them (cached per process)."""
        name = next(iter(topic.topics))
        if name not in self._partitions:
            from aiokafka.admin import AIOKafkaAdminClient

            from streams import kafka_auth

            admin = AIOKafkaAdminClient(bootstrap_servers=self.settings.kafka_bootstrap,
                                        request_timeout_ms=15000,
                                        **kafka_auth.client_options(self.settings))
            await admin.start()
            try:
                described = await admin.describe_topics([name])
            finally:
                await admin.close()
            count = len(described[0]["partitions"]) if described else 0
            if count <= 0:
                raise ConnectionError(f"broker reports no partitions for {name}")
            self._partitions[name] = count
        return self._partitions[name]
