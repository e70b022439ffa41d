"""The catalogue's topics bound to one Faust app (value types and codecs from topics/)."""
from __future__ import annotations

from dataclasses import dataclass

import faust

import topics as catalogue
from topics.catalogue import TopicSpec


@dataclass
class BoundTopics:
    """Faust topic objects for one app, one attribute per catalogue entry."""

    uploads: faust.TopicT
    partition_tasks: faust.TopicT
    page_ranges: faust.TopicT
    elements: faust.TopicT
    chunks: faust.TopicT
    enhanced: faust.TopicT
    embeddings: faust.TopicT
    status: faust.TopicT
    dead_letters: faust.TopicT


def _bind(app: faust.App, spec: TopicSpec) -> faust.TopicT:
    return app.topic(spec.name, key_type=str, value_type=spec.value_type,
                     key_serializer="raw", value_serializer="orjson",
                     partitions=spec.partitions, retention=None, compacting=spec.compacted)


def bind_topics(app: faust.App) -> BoundTopics:
    """Bind every catalogue topic to ``app`` (cached on the app)."""
    cached = getattr(app, "_ragstream_topics", None)
    if cached is None:
        cached = BoundTopics(
            uploads=_bind(app, catalogue.UPLOADS),
            partition_tasks=_bind(app, catalogue.PARTITION_TASKS),
            page_ranges=_bind(app, catalogue.PAGE_RANGES),
            elements=_bind(app, catalogue.ELEMENTS),
            chunks=_bind(app, catalogue.CHUNKS),
            enhanced=_bind(app, catalogue.ENHANCED),
            embeddings=_bind(app, catalogue.EMBEDDINGS),
            status=_bind(app, catalogue.STATUS),
            dead_letters=_bind(app, catalogue.DEAD_LETTERS),
        )
        app._ragstream_topics = cached
    return cached
