"""The API process's long-lived clients, opened at startup and closed at shutdown."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from adapters.api_keys import ApiKeys
from adapters.callbacks import Callbacks
from adapters.metadata import Metadata
from adapters.migrations import upgrade_head
from adapters.object_store import ObjectStore
from adapters.vector_store import VectorStore
from api.sse import StatusHub
from streams.kafka_io import producer
from streams.settings import Settings


@dataclass
class ApiState:
    """One per app: S3, PostgreSQL, a Kafka producer, the status hub, Milvus."""

    settings: Settings
    store: Optional[ObjectStore] = None
    metadata: Optional[Metadata] = None
    keys: Optional[ApiKeys] = None
    callbacks: Optional[Callbacks] = None
    producer: object = None
    hub: Optional[StatusHub] = None
    vectors: Optional[VectorStore] = None
    _producer_ctx: object = field(default=None, repr=False)

    async def open(self) -> None:
        """Upgrade the schema to head (adapters/migrations) and connect every client.  Raises when a service is down
        (the process then fails to start, which is what a supervisor should see)."""
        s = self.settings
        self.store = ObjectStore(s)
        await self.store.__aenter__()
        await self.store.ensure_bucket()
        await upgrade_head(s.pg_dsn)
        self.metadata = Metadata(s.pg_dsn)
        await self.metadata.__aenter__()
        self.keys = ApiKeys(self.metadata.pool)
        self.callbacks = Callbacks(self.metadata.pool)
        self._producer_ctx = producer(s.kafka_bootstrap)
        self.producer = await self._producer_ctx.__aenter__()
        self.hub = StatusHub(s.kafka_bootstrap)
        await self.hub.start()
        self.vectors = VectorStore(s.milvus_uri, timeout_s=10.0)

    async def close(self) -> None:
        """Close whatever was opened (safe after a partial open)."""
        if self.hub is not None:
            await self.hub.stop()
        if self._producer_ctx is not None:
            await self._producer_ctx.__aexit__(None, None, None)
        if self.metadata is not None:
            await self.metadata.__aexit__(None, None, None)
        if self.store is not None:
            await self.store.__aexit__(None, None, None)
        if self.vectors is not None:
            self.vectors.close()
