"""Per-process clients shared by the agents of one worker, opened on first use.

One S3 client, one PostgreSQL pool, one Milvus client, one embedder and one
blocking-work pool per worker process, created inside the running event loop; a stage
that parses bulk-lane work (agents/partition.py) has a second, niced pool for it.
"""
from __future__ import annotations

import asyncio
from typing import Any, Optional

from adapters.embedding_cache import EmbeddingCache
from adapters.metadata import Metadata
from adapters.migrations import upgrade_head
from adapters.object_store import ObjectStore
from adapters.vector_store import VectorStore
from stages.pool import BlockingPool
from streams.settings import Settings


class Resources:
    """Lazily opened clients; ``await close()`` on worker shutdown.

    ``pool_workers``: processes for blocking work in all (None: ``stage_workers``);
    ``bulk_workers`` of them (0: none) form a pool of their own whose processes run at
    ``bulk_parse_nice`` lower CPU priority, for bulk-lane tasks (:meth:`pool_for`)."""

    def __init__(self, settings: Settings, pool_workers: Optional[int] = None,
                 pool_preload: bool = False, bulk_workers: int = 0):
        self.settings = settings
        total = pool_workers or settings.stage_workers
        self.pool = BlockingPool(max(1, total - bulk_workers), preload=pool_preload)
        self.bulk_pool = BlockingPool(bulk_workers, preload=pool_preload, nice=settings.bulk_parse_nice) \
            if bulk_workers > 0 else None
        self.vectors = VectorStore(settings.milvus_uri)
        self._store: Optional[ObjectStore] = None
        self._metadata: Optional[Metadata] = None
        self._embedder: Any = None
        self._lock = asyncio.Lock()

    def pool_for(self, bulk: bool) -> BlockingPool:
        """The pool for a task: the niced bulk pool for bulk-lane work when there is one
        (a project's burst, page ranges of split documents), else the stage's pool."""
        return self.bulk_pool if bulk and self.bulk_pool is not None else self.pool

    def pools(self) -> list[BlockingPool]:
        """Every blocking-work pool of this process (to start or close them all)."""
        return [self.pool] + ([self.bulk_pool] if self.bulk_pool is not None else [])

    async def store(self) -> ObjectStore:
        """The S3 client (bucket ensured)."""
        async with self._lock:
            if self._store is None:
                store = ObjectStore(self.settings)
                await store.__aenter__()
                await store.ensure_bucket()
                self._store = store
        return self._store

    async def metadata(self) -> Metadata:
        """The PostgreSQL pool (schema upgraded to head first: adapters/migrations)."""
        async with self._lock:
            if self._metadata is None:
                await upgrade_head(self.settings.pg_dsn)
                md = Metadata(self.settings.pg_dsn)
                await md.__aenter__()
                self._metadata = md
        return self._metadata

    async def embedding_cache(self) -> EmbeddingCache:
        """The embedding cache (adapters/embedding_cache.py) over the PostgreSQL pool."""
        return EmbeddingCache((await self.metadata()).pool)

    async def embedder(self):
        """The configured embedder (adapters.embedder.create_embedder)."""
        async with self._lock:
            if self._embedder is None:
                from adapters.embedder import create_embedder

                # no retries inside the client: the stage runner's one retry policy
                # waits out a Triton outage (retries must not nest, issue 8 failure 9)
                self._embedder = create_embedder(self.settings.model_copy(update={"triton_retry_s": 0.0}))
        return self._embedder

    async def close(self) -> None:
        """Close every opened client and the process pool."""
        if self._store is not None:
            await self._store.__aexit__(None, None, None)
        if self._metadata is not None:
            await self._metadata.__aexit__(None, None, None)
        if self._embedder is not None:
            await self._embedder.close()
        self.vectors.close()
        for pool in self.pools():
            pool.close()
