"""The Faust app factory: one app per worker process, for a chosen set of stages.

``create_app(["partition"])`` builds the app ``ragstream-partition``: its own
consumer group, so each stage scales independently (Procfile).  ``create_app(ALL)``
builds ``ragstream`` with every agent in one worker, for development.
"""
from __future__ import annotations

from typing import Sequence

import faust

import schemas  # noqa: F401  (registers the orjson codec)
from streams import broker_quirks
from streams.settings import Settings, get_settings

STAGES: tuple[str, ...] = ("normalize", "partition", "chunk", "enhance", "embed", "index", "project", "notify")


class UnknownStage(ValueError):
    """A stage name that is not in STAGES."""


def app_id(stages: Sequence[str]) -> str:
    """Consumer-group id: ``ragstream`` for all stages, ``ragstream-{a}-{b}`` otherwise."""
    chosen = [s for s in STAGES if s in stages]
    if unknown := set(stages) - set(STAGES):
        raise UnknownStage(f"unknown stage(s) {sorted(unknown)}; choose from {list(STAGES)}")
    return "ragstream" if len(chosen) == len(STAGES) else "ragstream-" + "-".join(chosen)


def create_app(stages: Sequence[str] = STAGES, settings: Settings | None = None) -> faust.App:
    """A Faust app with the agents of ``stages`` registered (see agents/)."""
    settings = settings or get_settings()
    ident = app_id(stages)
    datadir = settings.data_dir / "faust" / ident
    datadir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        ident,
        broker=f"kafka://{settings.kafka_bootstrap}",
        value_serializer="orjson",
        key_serializer="raw",
        datadir=str(datadir),
        topic_partitions=settings.topic_partitions,
        web_enabled=False,
        autodiscover=False,
        consumer_auto_offset_reset="earliest",
        **broker_quirks.faust_settings(),
    )
    from agents import register  # imported late: agents import this module's names

    register(app, stages, settings)
    return app
