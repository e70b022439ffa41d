"""The embedding cache in PostgreSQL: a vector per (model, exact embedded text), so
unchanged chunks of a new document version — or any text embedded before — are
never embedded again.

The model is the embedder's ``cache_identity()`` (adapters/model_identity.py): a
digest of the weights, tokenizer and token limit actually loaded (ONNX) or of the
model as the Triton server reports it, so a worker started with another model or
token limit misses instead of serving the old model's vectors (issue 23, failure
7).  Rows written under the former fixed name ``all-MiniLM-L6-v2`` simply stop
matching (no migration: the key column holds any string); nothing evicts rows
today, so they stay until the table is cleared.

Table ``embedding_cache`` (revision 0003_embedding_cache): ``content_hash`` (hex
sha256 of ``model + "\\0" + text``, :func:`content_hash`), ``model``, ``dims``,
``vector`` (``dims`` float32 little-endian, as the embedder returned them, so a
vector read back is bit-identical), ``created_at``, ``last_used_at`` (refreshed on a
hit at most every :data:`TOUCH_AFTER_S` seconds).

:func:`embed_cached` is the one call the embed stage makes: one round trip to look a
batch up, the embedder for the misses only (each distinct text once), one round trip
to store the new vectors (``ON CONFLICT DO NOTHING``: two workers embedding the same
text both succeed and the first row stays).  Errors: asyncpg's (connection errors
are transient for the stage runner's retry policy); ``ValueError`` when the embedder
returns the wrong shape.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import asyncpg
import numpy as np

#: a hit refreshes ``last_used_at`` only when it is older than this (seconds), so
#: a hot cache is not rewritten on every read
TOUCH_AFTER_S = 3600

_LOOKUP = """
WITH hit AS (
    SELECT content_hash, dims, vector FROM embedding_cache WHERE content_hash = ANY($1::text[])
), touch AS (
    UPDATE embedding_cache e SET last_used_at = now()
    FROM (SELECT content_hash FROM embedding_cache
          WHERE content_hash = ANY($1::text[])
            AND last_used_at < now() - make_interval(secs => $2)
          FOR UPDATE SKIP LOCKED) s
    WHERE e.content_hash = s.content_hash
)
SELECT content_hash, dims, vector FROM hit
"""

_STORE = """
INSERT INTO embedding_cache (content_hash, model, dims, vector)
SELECT h, $2, $3, v FROM unnest($1::text[], $4::bytea[]) AS t(h, v)
ON CONFLICT (content_hash) DO NOTHING
"""


def content_hash(model: str, text: str) -> str:
    """Hex sha256 of ``model``, a NUL byte and ``text`` (UTF-8): the cache key."""
    return hashlib.sha256(model.encode() + b"\0" + text.encode()).hexdigest()


def to_bytes(vector: np.ndarray) -> bytes:
    """A vector as float32 little-endian bytes (4 per value)."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_bytes(raw: bytes, dims: int) -> np.ndarray:
    """Float32 ``(dims,)`` from :func:`to_bytes` output; ``ValueError`` on a length mismatch."""
    if len(raw) != 4 * dims:
        raise ValueError(f"cached vector has {len(raw)} bytes, expected {4 * dims}")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


@dataclass(frozen=True)
class CachedEmbedding:
    """Result of :func:`embed_cached`: ``vectors`` float32 ``(len(texts), dim)``, row i
    for ``texts[i]``; ``embedded`` distinct texts sent to the embedder (misses);
    ``cached`` texts served without embedding (``len(texts) - embedded``: found in the
    cache, or a repeat of another text of the batch)."""

    vectors: np.ndarray
    embedded: int
    cached: int
    keys: tuple = ()  # the cache key of each text, row i for texts[i] (adapters/erasure.py)


class EmbeddingCache:
    """The ``embedding_cache`` table over an asyncpg pool (the Metadata pool)."""

    def __init__(self, pool: asyncpg.Pool):
        self.pool = pool

    async def lookup(self, hashes: Sequence[str], dims: int) -> dict[str, np.ndarray]:
        """Stored vectors of ``hashes`` (one round trip): hash → float32 ``(dims,)``.
        Rows of another width are left out (treated as misses)."""
        if not hashes:
            return {}
        rows = await self.pool.fetch(_LOOKUP, list(hashes), float(TOUCH_AFTER_S))
        return {r["content_hash"]: from_bytes(r["vector"], dims) for r in rows if r["dims"] == dims}

    async def store(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        """Insert hash → vector rows of ``model`` (one round trip; existing hashes kept)."""
        if not vectors:
            return
        hashes = list(vectors)
        dims = int(np.asarray(vectors[hashes[0]]).shape[-1])
        await self.pool.execute(_STORE, hashes, model, dims, [to_bytes(vectors[h]) for h in hashes])

    async def count(self) -> int:
        """Rows in the cache (for benchmarks and tests)."""
        return int(await self.pool.fetchval("SELECT count(*) FROM embedding_cache"))

    async def clear(self) -> None:
        """Delete every row (a cold start for a benchmark; only costs re-embedding)."""
        await self.pool.execute("TRUNCATE embedding_cache")


async def embed_cached(texts: Sequence[str], embedder, cache: EmbeddingCache,
                       model: str) -> CachedEmbedding:
    """Vectors of ``texts`` (``embedder.embed`` contract: float32 ``(n, dim)``, unit
    rows): cached ones read back, the rest embedded once per distinct text and
    stored.  ``model``: the embedding model's key, the embedder's ``cache_identity()``
    (part of every row's hash; stored in the ``model`` column)."""
    texts = list(texts)
    dim = int(embedder.dim)
    if not texts:
        return CachedEmbedding(np.zeros((0, dim), dtype=np.float32), 0, 0)
    keys = [content_hash(model, t) for t in texts]
    found = await cache.lookup(sorted(set(keys)), dim)
    missing: dict[str, str] = {}  # hash → text, distinct, in first-seen order
    for key, text in zip(keys, texts):
        if key not in found:
            missing.setdefault(key, text)
    if missing:
        new = await embedder.embed(list(missing.values()))
        if new.shape != (len(missing), dim):
            raise ValueError(f"embedder returned {new.shape}, expected {(len(missing), dim)}")
        fresh = {key: np.asarray(new[i], dtype=np.float32) for i, key in enumerate(missing)}
        await cache.store(model, fresh)
        found.update(fresh)
    vectors = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
    return CachedEmbedding(vectors, len(missing), len(texts) - len(missing), tuple(keys))
