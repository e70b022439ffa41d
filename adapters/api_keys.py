"""API keys per project, stored hashed in PostgreSQL (table ``api_keys``, created by
adapters/migrations/).

A key looks like ``rsk_{key_id}.{secret}``: ``key_id`` (16 hex digits) is the row's
primary key and is safe to show and log; ``secret`` is 32 random bytes
(URL-safe base64).  Only SHA-256 of the whole key is stored: the key has 256 bits
of entropy, so a fast hash is enough (no password stretching needed), and a
leaked table does not reveal usable keys.  Verification compares hashes in
constant time.  ``ragstream apikey create --project P`` prints a key once.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any, Optional

import asyncpg

PREFIX = "rsk_"
KEY_RE = re.compile(r"rsk_([0-9a-f]{16})\.([A-Za-z0-9_-]{20,100})")

def hash_key(key: str) -> str:
    """Hex SHA-256 of the full key string (what the table stores)."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class CreatedKey:
    """A freshly created key: ``key`` is shown once and never stored in clear."""

    key_id: str
    project: str
    key: str


ADMIN_SCOPE = "*"  # the "project" of an admin key: no project name can be "*"


class ApiKeys:
    """Create, verify, list and revoke API keys over an asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool):
        self.pool = pool

    async def create(self, project: str, name: str = "") -> CreatedKey:
        """Create a key for ``project`` (or an admin key: ``project`` =
        :data:`ADMIN_SCOPE`, which answers only the admin routes, e.g. ``DELETE
        /v1/projects/{p}``); returns it (the only time it exists in clear)."""
        key_id = secrets.token_hex(8)
        key = f"{PREFIX}{key_id}.{secrets.token_urlsafe(32)}"
        await self.pool.execute(
            "INSERT INTO api_keys (key_id, project, key_hash, name) VALUES ($1, $2, $3, $4)",
            key_id, project, hash_key(key), name)
        return CreatedKey(key_id, project, key)

    async def verify(self, key: Optional[str]) -> Optional[str]:
        """The project of a valid, unrevoked key; None for a missing, malformed,
        unknown or revoked key (callers answer 401 without saying which).

        The hash is compared before anything is written: ``last_used_at`` is set only
        for a key that verified, so guessing secrets for a known key id changes nothing."""
        if not key:
            return None
        match = KEY_RE.fullmatch(key.strip())
        if not match:
            return None
        row = await self.pool.fetchrow(
            "SELECT project, key_hash FROM api_keys WHERE key_id = $1 AND revoked_at IS NULL",
            match.group(1))
        if row is None or not hmac.compare_digest(row["key_hash"], hash_key(key.strip())):
            return None  # a wrong secret for a known key id leaves no trace on the row
        await self.pool.execute(  # stamped only once the hash matched
            "UPDATE api_keys SET last_used_at = now() WHERE key_id = $1 AND key_hash = $2",
            match.group(1), row["key_hash"])
        return row["project"]

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; False when no such unrevoked key exists."""
        row = await self.pool.fetchval(
            "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL "
            "RETURNING 1", key_id)
        return row is not None

    async def list(self, project: Optional[str] = None) -> list[dict[str, Any]]:
        """Key rows (without hashes), newest first, optionally for one project."""
        rows = await self.pool.fetch(
            "SELECT key_id, project, name, created_at, revoked_at, last_used_at FROM api_keys "
            "WHERE ($1::text IS NULL OR project = $1) ORDER BY created_at DESC", project)
        return [dict(r) for r in rows]
