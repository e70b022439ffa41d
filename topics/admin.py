"""Create the catalogue's topics on the broker, from any process, in any start order.

The embedded broker (Tansu) does not auto-create topics usably and cannot add
partitions later (../shared/DESIGN.md), so every topic is created up front with its final
partition count; existing topics are left as they are.  Every process that
produces or consumes (worker, API, CLI ingest, demo, benches) calls
:func:`ensure_topics` at start: it waits for the broker with backoff (a broker still
starting, or restarting, is normal), tolerates another process creating the same
topics at the same moment, and returns once every topic is listed by the broker.
"""
from __future__ import annotations

import asyncio
import logging
import time

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from streams import kafka_auth
from streams.settings import Settings, get_settings
from topics.catalogue import ALL, TopicSpec

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36  # Kafka protocol error code


class BrokerUnavailable(RuntimeError):
    """The broker did not answer (or the topics did not appear) within the timeout."""


class TopicRefused(RuntimeError):
    """The broker refused to create a topic (not retried)."""


class _NotYet(Exception):
    """Internal: the broker answered, but not every topic is listed yet."""


async def _ensure_once(bootstrap: str, default_partitions: int, specs: tuple[TopicSpec, ...],
                       created: set[str], settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000,
                                **kafka_auth.client_options(settings))
    replicas = settings.topic_replication_factor
    min_insync = settings.topic_min_insync_replicas
    kafka_log = logging.getLogger("aiokafka")
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)  # "Unable connect" while the broker (re)starts is expected
    try:
        try:
            await admin.start()
        except (KeyError, ValueError) as exc:  # aiokafka on a refused SCRAM login
            raise kafka_auth.refused_login(exc, settings) or exc
        existing = set(await admin.list_topics())
        missing = [NewTopic(s.name, s.partitions or default_partitions, replicas,
                            topic_configs=s.config(min_insync))
                   for s in specs if s.name not in existing]
        if missing:
            try:
                response = await admin.create_topics(missing)
            except TopicAlreadyExistsError:  # another process won the race
                response = None
            for err in getattr(response, "topic_errors", ()) or ():
                name, code = err[0], err[1]
                if code == 0:
                    created.add(name)
                elif code != TOPIC_ALREADY_EXISTS:
                    raise TopicRefused(f"creating topic {name}: error code {code} {err[2:] or ''}")
            existing = set(await admin.list_topics())
        still = sorted(s.name for s in specs if s.name not in existing)
        if still:
            raise _NotYet(f"topics not listed yet: {still}")
    finally:
        kafka_log.setLevel(level)
        try:
            await admin.close()
        except Exception:  # noqa: BLE001 - closing a half-started client
            pass


async def ensure_topics(bootstrap: str, default_partitions: int,
                        specs: tuple[TopicSpec, ...] = ALL, timeout_s: float = 60.0,
                        settings: Settings | None = None) -> list[str]:
    """Create missing topics and wait until the broker lists all of ``specs``.

    Each topic gets ``settings.topic_replication_factor`` replicas and, when set,
    ``min.insync.replicas``; the client authenticates as ``settings`` say
    (streams/kafka_auth.py).  ``settings`` defaults to ``get_settings()``.

    Retries (exponential backoff 0.2 s … 3 s) while the broker is unreachable or a
    topic is not listed yet, for up to ``timeout_s`` seconds.  Topics created
    concurrently by another process count as existing.  Returns the names this
    call created (empty when all existed).

    Raises :class:`BrokerUnavailable` (with the last error) after ``timeout_s``,
    :class:`TopicRefused` at once when the broker refuses a topic for another reason,
    and ``streams.kafka_auth.KafkaLoginRefused`` at once when it refuses the login.
    """
    settings = settings or get_settings()
    created: set[str] = set()
    start = time.monotonic()
    retrying = AsyncRetrying(
        stop=stop_after_delay(timeout_s),
        wait=wait_exponential(multiplier=0.2, max=3.0),
        retry=retry_if_exception_type((_NotYet, KafkaError, OSError, TimeoutError)),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:  # bounded: a client that never hears back (a SASL handshake with a
                # broker that speaks none) would otherwise outlive the wait
                left = max(1.0, timeout_s - (time.monotonic() - start))
                await asyncio.wait_for(_ensure_once(bootstrap, default_partitions, specs, created, settings),
                                       left)
            if attempt.retry_state.attempt_number > 1:
                log.info("broker %s ready after %.1f s", bootstrap, time.monotonic() - start)
    except (_NotYet, KafkaError, OSError, TimeoutError) as exc:
        raise BrokerUnavailable(
            f"broker {bootstrap} not ready within {timeout_s:.0f} s "
            f"(is `ragstream dev up` running?): {type(exc).__name__}: {exc}") from exc
    return sorted(created)
