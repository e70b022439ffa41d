"""The data keys of document versions (table ``document_keys``, revision 0004), and
sealing/opening records with them (schemas/sealing.py: AES-256-GCM).

A version's key is made the first time a record of it is sealed (the uploader's
QUEUED status and upload event, normally), never for a version a delete already
covers (``document_deletions``); :meth:`DocumentKeys.shred` destroys the keys of every
version up to a deleted one (``data_key`` NULL, the row kept so no key is ever made
again for it).  Records sealed with a destroyed key open blank: their content is
gone from every topic, dead letter and replay.

Keys are cached per process for :data:`CACHE_TTL_S` seconds (a stage seals and
opens every chunk of a version: one query per version, not per record); a process
that cached a key before a delete may seal with it for at most that long, and what
it seals then is sealed with a destroyed key.  Errors: asyncpg's (connection errors
are transient for the stage runner's retry policy).
"""
from __future__ import annotations

import time
from typing import Optional, TypeVar

import asyncpg
import faust

from schemas.sealing import carries_content, new_data_key, open_record, seal_record

#: seconds a key (or its absence) is cached in a process
CACHE_TTL_S = 30.0
_CACHE_MAX = 4096

R = TypeVar("R", bound=faust.Record)

_MAKE = """
WITH made AS (
    INSERT INTO document_keys (document_id, version, data_key)
    SELECT $1, $2, $3
    WHERE NOT EXISTS (SELECT 1 FROM document_deletions d
                      WHERE d.document_id = $1 AND d.up_to_version >= $2)
    ON CONFLICT (document_id, version) DO NOTHING
    RETURNING data_key
)
SELECT data_key FROM made
UNION ALL
SELECT data_key FROM document_keys WHERE document_id = $1 AND version = $2
"""


class DocumentKeys:
    """Data keys over an asyncpg pool (the Metadata pool)."""

    def __init__(self, pool: asyncpg.Pool):
        self.pool = pool
        self._cache: dict[tuple[str, int], tuple[float, Optional[bytes]]] = {}

    def _cached(self, ref: tuple[str, int]) -> tuple[bool, Optional[bytes]]:
        hit = self._cache.get(ref)
        if hit is None or time.monotonic() - hit[0] > CACHE_TTL_S:
            return False, None
        return True, hit[1]

    def _remember(self, ref: tuple[str, int], key: Optional[bytes]) -> Optional[bytes]:
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[ref] = (time.monotonic(), key)
        return key

    async def key_for(self, document_id: str, version: int) -> Optional[bytes]:
        """The version's 32-byte key, made now if it has none; None when it was
        destroyed or a delete covers the version."""
        ref = (document_id, int(version))
        found, key = self._cached(ref)
        if found and key is not None:
            return key
        rows = await self.pool.fetch(_MAKE, document_id, int(version), new_data_key())
        key = bytes(rows[0]["data_key"]) if rows and rows[0]["data_key"] is not None else None
        return self._remember(ref, key)

    async def existing_key(self, document_id: str, version: int) -> Optional[bytes]:
        """The version's key, or None (destroyed, or never made); makes none."""
        ref = (document_id, int(version))
        found, key = self._cached(ref)
        if found:
            return key
        raw = await self.pool.fetchval(
            "SELECT data_key FROM document_keys WHERE document_id = $1 AND version = $2",
            document_id, int(version))
        return self._remember(ref, bytes(raw) if raw is not None else None)

    async def shred(self, document_id: str, up_to_version: int) -> int:
        """Destroy the keys of versions 1..``up_to_version`` of a document (the rows
        stay, key NULL, so none is made again); returns how many were destroyed now."""
        status = await self.pool.execute(
            "UPDATE document_keys SET data_key = NULL, shredded_at = now()"
            " WHERE document_id = $1 AND version <= $2 AND data_key IS NOT NULL",
            document_id, int(up_to_version))
        for ref in [r for r in self._cache if r[0] == document_id and r[1] <= up_to_version]:
            self._cache.pop(ref, None)
        return int(status.split()[-1])

    async def seal(self, record: R) -> R:
        """``record`` with its content sealed under its version's key (made if
        needed; content dropped when the version is deleted).  Records without
        content, or without a document identity, are returned as they are."""
        if not carries_content(record) or not getattr(record, "document_id", ""):
            return record
        return seal_record(record, await self.key_for(record.document_id, record.version))

    async def open(self, record: R) -> tuple[R, bool]:
        """(``record`` with its sealed content put back, False), or (``record`` with
        its content blank, True) when its version's key was destroyed.  Raises
        schemas.sealing.SealBroken when the blob does not open with the key."""
        if not getattr(record, "sealed", None):
            return record, False
        key = await self.existing_key(record.document_id, record.version)
        return open_record(record, key), key is None
