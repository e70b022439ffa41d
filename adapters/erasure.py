"""Erasing a deleted document's content from everything ragstream keeps besides the
objects in S3 (agents/normalize.py deletes those): every physical Milvus collection
of its project, the embedding cache, the file name, user metadata, failed-part
reasons and a sync's source path in PostgreSQL, and — last — its
data keys, which makes every sealed record of it on the topics and in dead letters
unreadable (schemas/sealing.py; the broker never compacts: streams/broker_quirks.py,
quirk 10).

Each step is idempotent, so a redelivered or re-driven delete runs them again
harmlessly.  Every step covers versions 1..``up_to_version`` only: a newer version
uploaded after the delete keeps its rows, cache entries and key.
"""
from __future__ import annotations

import asyncio
from typing import Sequence

import asyncpg

from adapters import collection_aliases as ca
from adapters.document_keys import DocumentKeys
from adapters.failed_parts import erase_failed_parts
from adapters.vector_store import VectorStore, quote_literal

# the cache rows of the deleted versions' texts, unless a version of another document
# (or a newer version of this one) still uses the same text; then the use rows.  One
# statement: the NOT EXISTS reads the snapshot from before the CTE's DELETE, hence
# its explicit exclusion of the rows being deleted.
_ERASE_CACHE = """
WITH gone AS (
    DELETE FROM embedding_cache_uses WHERE document_id = $1 AND version <= $2
    RETURNING content_hash
)
DELETE FROM embedding_cache c
USING (SELECT DISTINCT content_hash FROM gone) g
WHERE c.content_hash = g.content_hash
  AND NOT EXISTS (SELECT 1 FROM embedding_cache_uses u
                  WHERE u.content_hash = g.content_hash
                    AND NOT (u.document_id = $1 AND u.version <= $2))
"""

_RECORD_USES = """
INSERT INTO embedding_cache_uses (document_id, version, content_hash)
SELECT * FROM unnest($1::text[], $2::int[], $3::text[])
ON CONFLICT DO NOTHING
"""


async def record_cache_uses(pool: asyncpg.Pool, uses: Sequence[tuple[str, int, str]]) -> None:
    """Remember which embedding-cache rows (``content_hash``) which document versions
    used: ``uses`` is ``[(document_id, version, content_hash), ...]`` (one round trip;
    repeats ignored).  Read by :func:`erase_cache_entries`."""
    uses = sorted(set(uses))
    if uses:
        await pool.execute(_RECORD_USES, [u[0] for u in uses], [int(u[1]) for u in uses],
                           [u[2] for u in uses])


async def erase_cache_entries(pool: asyncpg.Pool, document_id: str, up_to_version: int) -> int:
    """Delete the embedding-cache rows of the texts of a document's versions
    1..``up_to_version`` that no other live version uses, and the use rows; returns
    the cache rows deleted.  (The cache is a cache: a row wrongly deleted only costs
    one embedding.)"""
    status = await pool.execute(_ERASE_CACHE, document_id, int(up_to_version))
    return int(status.split()[-1])


async def blank_names_and_metadata(pool: asyncpg.Pool, document_id: str, up_to_version: int) -> None:
    """The file name and the user metadata of versions 1..``up_to_version`` blanked in
    ``document_versions`` and, when it shows one of them, the file name in the status
    projection row ``documents`` (the row itself stays: id, project, version, status
    DELETED)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE document_versions SET filename = '', user_metadata = NULL"
                           " WHERE document_id = $1 AND version <= $2"
                           " AND (filename <> '' OR user_metadata IS NOT NULL)", document_id, int(up_to_version))
        await conn.execute("UPDATE documents SET filename = '' WHERE document_id = $1"
                           " AND version <= $2 AND filename <> ''", document_id, int(up_to_version))


async def forget_source_paths(pool: asyncpg.Pool, document_id: str, up_to_version: int) -> None:
    """The ``source_objects`` rows (``ragstream sync``: its path in the source, a file
    name by another name) of versions 1..``up_to_version``: a synced document deleted
    by hand keeps no path; a later sync that still lists it adds it again."""
    await pool.execute("DELETE FROM source_objects WHERE document_id = $1 AND version <= $2",
                       document_id, int(up_to_version))


def delete_from_every_collection(store: VectorStore, project: str, document_id: str,
                                 up_to_version: int) -> list[str]:
    """Delete the rows of versions 1..``up_to_version`` of a document from every
    physical collection of ``project`` (``chunks_{project}__v{n}``: the ones behind
    the ``prod``/``test``/``previous`` aliases and the ones kept for rollback, so a
    rollback cannot bring them back); returns the collections asked.  Blocks: call it
    in a thread."""
    expr = f"document_id == {quote_literal(document_id)} and version <= {int(up_to_version)}"
    names = list(ca.physical_versions(store, project).values())
    for name in names:
        ca.delete_where(store, project, name, expr)
    return names


async def erase_document(*, store: VectorStore, pool: asyncpg.Pool, keys: DocumentKeys,
                         project: str, document_id: str, up_to_version: int) -> None:
    """Every step above for versions 1..``up_to_version`` of a document, the data keys
    destroyed last (so a step that fails and is retried still finds what it needs).
    Errors: pymilvus' and asyncpg's (transient ones are retried by the stage runner)."""
    await asyncio.to_thread(delete_from_every_collection, store, project, document_id, up_to_version)
    await erase_cache_entries(pool, document_id, up_to_version)
    await blank_names_and_metadata(pool, document_id, up_to_version)
    await erase_failed_parts(pool, document_id, up_to_version)
    await forget_source_paths(pool, document_id, up_to_version)
    await keys.shred(document_id, up_to_version)
