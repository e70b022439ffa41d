"""What a stage worker's agent shares: topics, clients, settings, status emitter."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import faust

from schemas import DocumentStatus, status_event
from streams.bound_topics import BoundTopics, bind_topics
from streams.resources import Resources
from streams.settings import Settings


@dataclass
class StageContext:
    """Shared by the agent of one app; ``resources`` opens clients lazily."""

    app: faust.App
    settings: Settings
    topics: BoundTopics
    resources: Resources
    _partitions: dict[str, int] = field(default_factory=dict)

    @classmethod
    def for_app(cls, app: faust.App, settings: Settings,
                pool_workers: Optional[int] = None) -> "StageContext":
        """The context of ``app``'s stage; ``pool_workers``: processes of its
        blocking-work pool (None: the ``stage_workers`` setting)."""
        ctx = cls(app, settings, bind_topics(app), Resources(settings, pool_workers))

        @app.on_before_shutdown.connect  # close clients and the process pool
        async def _close(sender, **kwargs) -> None:  # noqa: ARG001
            await ctx.resources.close()

        return ctx

    async def emit(self, ref, status: DocumentStatus, *, stage: str, chunks_total: int = 0,
                   chunks_done: int = 0, pages: int = 0, error: Optional[str] = None,
                   error_code: Optional[str] = None) -> None:
        """Send one status transition for the document version ``ref`` names
        (``error``: the human sentence; ``error_code``: its stages.errors code)."""
        await self.topics.status.send(key=ref.document_id, value=status_event(
            ref.document_id, ref.version, status, stage=stage, project=ref.project,
            filename=ref.filename, chunks_total=chunks_total, chunks_done=chunks_done,
            pages=pages, error=error, error_code=error_code,
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
        A batch that fails for good (after ``producer_request_timeout``) is logged
        by Faust; this waits for it either way, like Faust's own commit does.
        """
        await self.app.producer.flush()

    async def partition_count(self, topic: faust.TopicT) -> int:
        """Partitions of ``topic`` as the broker reports them (cached per process)."""
        name = next(iter(topic.topics))
        if name not in self._partitions:
            from aiokafka.admin import AIOKafkaAdminClient

            admin = AIOKafkaAdminClient(bootstrap_servers=self.settings.kafka_bootstrap,
                                        request_timeout_ms=15000)
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
