"""The Faust app factory: one app — one consumer group — per stage.

``create_app("partition")`` builds the app ``ragstream-partition``.  The consumer
group of a stage is the same whatever the deployment shape (all stages under one
``ragstream worker``, one process per stage from the Procfile, Kubernetes
Deployments), so its committed offsets survive a redeploy from one shape to
another and nothing is re-read unless a replay asks for it (issue 8, failure 2).
``ragstream worker`` with several stages runs one process per stage
(streams/worker.py) rather than one app with several groups, which Faust cannot do.
"""
from __future__ import annotations

from typing import Sequence

import faust

import schemas  # noqa: F401  (registers the orjson codec)
from streams import broker_quirks, commit_order, fair_fetch, kafka_auth
from streams.settings import Settings, get_settings

# ``projection`` writes the status changelog into PostgreSQL (it was ``project``,
# which collided with "project" the tenant).
STAGES: tuple[str, ...] = ("normalize", "partition", "chunk", "enhance", "embed", "index",
                           "projection", "notify")
GROUP_PREFIX = "ragstream-"


class UnknownStage(ValueError):
    """A stage name that is not in STAGES."""


def check_stages(stages: Sequence[str]) -> list[str]:
    """``stages`` in pipeline order; raises UnknownStage for a name not in STAGES."""
    if unknown := set(stages) - set(STAGES):
        raise UnknownStage(f"unknown stage(s) {sorted(unknown)}; choose from {list(STAGES)}")
    return [s for s in STAGES if s in stages]


def app_id(stage: str) -> str:
    """Consumer-group id of one stage: ``ragstream-{stage}``, stable across deployments."""
    check_stages([stage])
    return GROUP_PREFIX + stage


def stage_fetch_settings(stage: str, settings: Settings) -> dict:
    """Faust consumer settings of one stage, so an event on one lane's partition is
    not queued behind thousands on another's (topics/lanes.py).  The chunk-level
    stages (enhance, embed, index) fetch at most ``embed_fetch_max_bytes`` per partition per
    request, buffer at most ``embed_stream_buffer`` events and take at most
    ``embed_poll_records`` records per poll; the document-level stages (normalize,
    partition, chunk) poll ``task_poll_records`` and buffer ``task_stream_buffer``
    events (Faust's defaults: 1 MiB, every fetched record, 4096 events).  Polls take
    the partitions in turn (streams/fair_fetch.py; the embedded broker ignores the
    byte limit, quirk 12).  Other stages keep Faust's defaults."""
    if stage in ("enhance", "embed", "index"):
        return {"consumer_max_fetch_size": settings.embed_fetch_max_bytes,
                "broker_max_poll_records": settings.embed_poll_records,
                "stream_buffer_maxsize": settings.embed_stream_buffer}
    if stage in ("normalize", "partition", "chunk"):
        return {"broker_max_poll_records": settings.task_poll_records,
                "stream_buffer_maxsize": settings.task_stream_buffer}
    return {}


def laned_topics(settings: Settings) -> list[str]:
    """Names of the topics whose first half of partitions is a lane of its own
    (topics/lanes.py): the document topics while project lanes are on
    (``fair_project_burst``), the chunk topics while size lanes are on."""
    from topics import CHUNKS, ELEMENTS, EMBEDDINGS, ENHANCED, PARTITION_TASKS, UPLOADS

    names = [UPLOADS.name, PARTITION_TASKS.name, ELEMENTS.name] if settings.project_lanes else []
    return names + ([CHUNKS.name, ENHANCED.name, EMBEDDINGS.name]
                    if settings.fair_small_document_chunks > 0 else [])


def create_app(stage: str, settings: Settings | None = None) -> faust.App:
    """A Faust app running the agent of one ``stage`` (see agents/)."""
    settings = settings or get_settings()
    ident = app_id(stage)
    datadir = settings.data_dir / "faust" / ident
    datadir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        ident,
        broker=f"kafka://{settings.kafka_bootstrap}",
        value_serializer="raw",
        key_serializer="raw",
        datadir=str(datadir),
        topic_partitions=settings.topic_partitions,
        web_enabled=False,
        autodiscover=False,
        # a stage's group is new only on the first deployment (ids are stable), when
        # everything already on its topic is work still to do
        consumer_auto_offset_reset="earliest",
        broker_credentials=kafka_auth.faust_credentials(settings),
        # a document's records from one stage leave in one produce request
        producer_linger=settings.producer_linger_ms / 1000.0,
        **broker_quirks.faust_settings(settings),
        **stage_fetch_settings(stage, settings),
    )
    # quirk 8: a commit during an S3 outage; quirk 13: the Fetch wait
    broker_quirks.install_consumer_workarounds(app, settings.consumer_fetch_wait_ms)
    broker_quirks.keep_membership_on_close()  # quirk 9: no LeaveGroup (it can strand the group)
    broker_quirks.keep_topics_through_outages()  # quirk 11: topics vanish from metadata in an S3 outage
    commit_order.install()  # faust commits past an unfinished event under concurrency
    fair_fetch.rotate_partially_drained()  # polls take partitions in turn (size lanes)
    fair_fetch.prefer_lanes(laned_topics(settings), settings.fair_bulk_turn)  # lanes first
    from agents import register  # imported late: agents import this module's names

    register(app, stage, settings)
    return app
