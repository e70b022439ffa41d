"""Running a Faust worker for a chosen set of stages.

``ragstream worker`` runs every agent in one process (one consumer group,
``ragstream``); ``ragstream worker --stages partition`` runs one stage in its own
consumer group (``ragstream-partition``) — one Procfile process type per stage.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Sequence

from streams.app import STAGES, create_app
from streams.metrics import serve_metrics
from streams.settings import get_settings
from streams.shutdown import install_shutdown_watchdog
from topics.admin import ensure_topics


def run_worker(stages: Sequence[str] = STAGES, loglevel: str = "info") -> None:
    """Create the topics if missing, then run a Faust worker until SIGTERM/SIGINT."""
    import faust

    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    settings = get_settings()
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    serve_metrics(settings.metrics_port)
    asyncio.set_event_loop(asyncio.new_event_loop())
    app = create_app(stages, settings)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    print(f"ragstream worker: stages {', '.join(stages)}; consumer group {app.conf.id}; "
          f"broker {settings.kafka_bootstrap}", file=sys.stderr, flush=True)

    @app.on_partitions_assigned.connect
    async def _ready(sender, assigned, **kwargs) -> None:  # noqa: ARG001
        print(f"ragstream worker: ready, {len(assigned)} topic partitions assigned",
              file=sys.stderr, flush=True)

    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    install_shutdown_watchdog(settings.shutdown_grace_s)  # bounded stop even if Faust hangs
    worker.execute_from_commandline()
