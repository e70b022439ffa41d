"""Create the catalogue's topics on the broker before any worker starts.

The embedded broker (Tansu) does not auto-create topics usably and cannot add
partitions later (DESIGN.md), so every topic is created up front with its final
partition count; existing topics are left as they are.
"""
from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from topics.catalogue import ALL, TopicSpec


async def ensure_topics(bootstrap: str, default_partitions: int,
                        specs: tuple[TopicSpec, ...] = ALL) -> list[str]:
    """Create missing topics; returns the names created (empty when all existed).

    Raises aiokafka errors other than "already exists" (e.g. the broker is down).
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [
            NewTopic(s.name, s.partitions or default_partitions, 1, topic_configs=s.config())
            for s in specs if s.name not in existing
        ]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass
        return [t.name for t in missing]
    finally:
        await admin.close()
