"""Metadata in PostgreSQL (asyncpg): document versions and the status projection.

Tables (created and changed only by the revisions in adapters/migrations/):

- ``document_versions`` — one row per uploaded version: the uploader's registry
  that turns "same document id, new bytes" into version n+1 and "same bytes" into
  the existing version.
  ``error_code`` is the failure code (stages.errors.CODES) of a FAILED version,
  projected from its status event.
  ``queued_at`` is the outbox mark: NULL until the version's upload event was
  acknowledged by the broker, so a retry (or the sweeper in the normalize worker)
  sends a version whose first attempt failed half-way (issue 8, failure 1).
- ``documents`` — the status projection: one row per document, the latest
  transition by sequence (``seq``); an older or duplicate event never moves it back.
- the delivery ledger (adapters/version_ledger.py): outcomes, deletions, steps.

A document id belongs to the project that first used it: registering it under
another project raises DocumentIdInUse (issue 8, failure 13).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

import asyncpg
import orjson

from adapters.pg_pool import create_pool
from adapters.version_ledger import VersionLedger
from schemas import StatusEvent

PROJECT_STATUS = """
INSERT INTO documents AS d (document_id, project, filename, version, status, seq, stage,
                            chunks_total, chunks_done, pages, error, callback_url, updated_at,
                            partial, failed_parts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb)
ON CONFLICT (document_id) DO UPDATE SET
    project = EXCLUDED.project,
    filename = CASE WHEN EXCLUDED.status = 'DELETED' THEN ''
                    WHEN EXCLUDED.filename = '' THEN d.filename ELSE EXCLUDED.filename END,
    version = EXCLUDED.version, status = EXCLUDED.status, seq = EXCLUDED.seq,
    stage = EXCLUDED.stage,
    chunks_total = GREATEST(EXCLUDED.chunks_total,
                            CASE WHEN d.version = EXCLUDED.version THEN d.chunks_total ELSE 0 END),
    chunks_done = EXCLUDED.chunks_done,
    pages = GREATEST(EXCLUDED.pages, CASE WHEN d.version = EXCLUDED.version THEN d.pages ELSE 0 END),
    error = EXCLUDED.error,
    callback_url = COALESCE(EXCLUDED.callback_url, d.callback_url),
    updated_at = EXCLUDED.updated_at,
    partial = EXCLUDED.partial, failed_parts = EXCLUDED.failed_parts
WHERE d.seq < EXCLUDED.seq
RETURNING document_id
"""


#: a projected ``documents`` row plus the ``error_code`` of its version (FAILED only)
_DOC_COLUMNS = ("d.*, CASE WHEN d.status = 'FAILED' THEN v.error_code END AS error_code"
                " FROM documents d LEFT JOIN document_versions v"
                " ON v.document_id = d.document_id AND v.version = d.version")


async def versions_metadata(pool: asyncpg.Pool, versions: set[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    """The user metadata of document versions: ``{(document_id, version): object}``
    for those that have one (one query; versions without metadata are left out)."""
    if not versions:
        return {}
    ids, numbers = zip(*sorted(versions))
    rows = await pool.fetch(
        "SELECT v.document_id, v.version, v.user_metadata::text AS meta FROM document_versions v"
        " JOIN unnest($1::text[], $2::int[]) AS w(document_id, version)"
        " ON w.document_id = v.document_id AND w.version = v.version"
        " WHERE v.user_metadata IS NOT NULL", list(ids), list(numbers))
    return {(r["document_id"], r["version"]): orjson.loads(r["meta"]) for r in rows}


class DocumentGone(LookupError):
    """A change of a document (a metadata update) that a delete got to first."""


class DocumentIdInUse(ValueError):
    """The document id is already used by another project."""


@dataclass(frozen=True)
class VersionAllocation:
    """Result of registering an upload: its version, whether it is new, and whether
    its events were already sent (``queued``; False for a new version, and for an
    existing one whose first upload failed before its events were sent)."""

    document_id: str
    version: int
    created: bool
    raw_key: str
    queued: bool = False


class Metadata:
    """asyncpg pool over the ragstream database."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.pool: Optional[asyncpg.Pool] = None

    async def __aenter__(self) -> "Metadata":
        self.pool = await create_pool(self.dsn, min_size=1, max_size=4)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    @property
    def ledger(self) -> VersionLedger:
        """The delivery ledger over this pool (adapters/version_ledger.py)."""
        return VersionLedger(self.pool)

    async def register_version(self, *, document_id: str, project: str, category: str,
                               filename: str, sha256: str, size: int, raw_key_for,
                               callback_url: Optional[str] = None,
                               content_type: Optional[str] = None,
                               user_metadata: Optional[dict] = None,
                               require_live: bool = False,
                               new_version: bool = False) -> VersionAllocation:
        """Allocate the version for an upload of ``sha256`` under ``document_id``.

        Same bytes as the latest version → that version (``created=False``, and
        ``queued`` says whether its events were already sent); else latest + 1 (1 for
        a new document).  A latest version that FAILED or was deleted is never reused:
        uploading it again is a retry, i.e. a new version (read from the ledger, not
        the lagging projection).  ``raw_key_for(version) -> str`` names the raw
        object.  Serialised per document by an advisory lock.  Raises DocumentIdInUse
        when the id belongs to another project.

        ``user_metadata`` (validated: schemas/user_metadata.py): None keeps the latest
        version's metadata; an object (``{}`` clears it) that differs from the latest
        version's makes a new version even for the same bytes — so changing metadata
        is a re-upload whose embeddings all come from the embedding cache.
        ``require_live``: raise DocumentGone when no version exists or a delete covers
        the latest (a metadata update never brings a deleted document back).
        """
        async with self.pool.acquire() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", document_id)
                row = await conn.fetchrow(
                    "SELECT v.version, v.sha256, v.raw_key, v.project, v.queued_at, v.user_metadata::text,"
                    " o.outcome, coalesce(x.up_to_version, 0) AS deleted_up_to"
                    " FROM document_versions v"
                    " LEFT JOIN version_outcomes o ON o.document_id = v.document_id AND o.version = v.version"
                    " LEFT JOIN document_deletions x ON x.document_id = v.document_id"
                    " WHERE v.document_id = $1 ORDER BY v.version DESC LIMIT 1", document_id)
                if row and row["project"] != project:
                    raise DocumentIdInUse(
                        f"document id {document_id!r} is in use by another project")
                if require_live and (row is None or row["deleted_up_to"] >= row["version"]):
                    raise DocumentGone(f"document {document_id!r} was deleted")
                latest_meta = orjson.loads(row["user_metadata"]) if row and row["user_metadata"] else None
                if user_metadata is None:
                    user_metadata = latest_meta
                if (not new_version and row and row["sha256"] == sha256 and row["outcome"] != "FAILED"
                        and row["deleted_up_to"] < row["version"] and (user_metadata or None) == latest_meta):
                    return VersionAllocation(document_id, row["version"], False, row["raw_key"],
                                             queued=row["queued_at"] is not None)
                version = (row["version"] if row else 0) + 1
                key = raw_key_for(version)
                await conn.execute(
                    "INSERT INTO document_versions (document_id, version, project, category, filename,"
                    " sha256, size, raw_key, callback_url, content_type, user_metadata)"
                    " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11::jsonb)",
                    document_id, version, project, category, filename, sha256, size, key,
                    callback_url, content_type, orjson.dumps(user_metadata).decode() if user_metadata else None)
                return VersionAllocation(document_id, version, True, key)

    async def mark_queued(self, document_id: str, version: int) -> None:
        """The version's QUEUED status and upload event were acknowledged by the broker."""
        await self.pool.execute(
            "UPDATE document_versions SET queued_at = now() WHERE document_id = $1 AND version = $2"
            " AND queued_at IS NULL", document_id, version)

    async def unqueued_versions(self, older_than_s: float, limit: int = 100) -> list[dict[str, Any]]:
        """Latest versions registered more than ``older_than_s`` seconds ago whose events
        were never sent (an uploader died or lost the broker half-way), oldest first."""
        rows = await self.pool.fetch(
            "SELECT v.* FROM document_versions v"
            " WHERE v.queued_at IS NULL AND v.created_at < now() - make_interval(secs => $1)"
            "   AND v.version = (SELECT max(version) FROM document_versions w"
            "                    WHERE w.document_id = v.document_id)"
            " ORDER BY v.created_at LIMIT $2", float(older_than_s), limit)
        return [dict(r) for r in rows]

    async def in_flight_versions(self, project: str, window_s: float, limit: int) -> int:
        """How many versions ``project`` registered in the last ``window_s`` seconds that
        have no outcome yet (neither COMPLETED nor FAILED, nor covered by a delete),
        counted up to ``limit`` (the query stops there: a bulk upload's thousands cost no
        more than ``limit`` index entries; index ``document_versions_project_created``).
        A version superseded before it finished counts until the window passes it."""
        return await self.pool.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM document_versions v WHERE v.project = $1"
            " AND v.created_at > now() - make_interval(secs => $2)"
            " AND NOT EXISTS (SELECT 1 FROM version_outcomes o"
            "                 WHERE o.document_id = v.document_id AND o.version = v.version)"
            " AND NOT EXISTS (SELECT 1 FROM document_deletions d"
            "                 WHERE d.document_id = v.document_id AND d.up_to_version >= v.version)"
            " LIMIT $3) in_flight",
            project, float(window_s), limit)

    async def versions(self, document_id: str) -> list[dict[str, Any]]:
        """Every registered version of a document, oldest first."""
        rows = await self.pool.fetch(
            "SELECT * FROM document_versions WHERE document_id = $1 ORDER BY version", document_id)
        return [dict(r) for r in rows]

    async def apply_status(self, event: StatusEvent) -> bool:
        """Project one status event; True when it moved the document forward.

        A stale (lower ``seq``) or duplicate (equal ``seq``) event changes nothing.
        """
        at = datetime.fromtimestamp(event.at or 0, tz=timezone.utc)
        row = await self.pool.fetchval(
            PROJECT_STATUS, event.document_id, event.project, event.filename or "", event.version,
            event.status, event.seq, event.stage, event.chunks_total, event.chunks_done,
            event.pages, event.error, event.callback_url, at, bool(getattr(event, "partial", False)),
            orjson.dumps(event.failed_parts).decode() if getattr(event, "failed_parts", None) else None)
        code = getattr(event, "error_code", None)
        if code:  # one terminal state per version: the code of its FAILED event
            await self.pool.execute(
                "UPDATE document_versions SET error_code = $3 WHERE document_id = $1"
                " AND version = $2 AND error_code IS DISTINCT FROM $3",
                event.document_id, event.version, code)
        return row is not None

    async def get_document(self, document_id: str) -> Optional[dict[str, Any]]:
        """The projected row of one document (with its version's ``error_code``), or None."""
        row = await self.pool.fetchrow(
            f"SELECT {_DOC_COLUMNS} WHERE d.document_id = $1", document_id)
        return dict(row) if row else None

    async def list_documents(self, project: Optional[str] = None, status: Optional[str] = None,
                             limit: int = 100) -> list[dict[str, Any]]:
        """The ``limit`` most recently updated projected rows, optionally filtered by
        project and status (a live view: no offset, as rows move while they change;
        the API pages by ``created_at`` instead, see :mod:`api.listing_cursor`)."""
        rows = await self.pool.fetch(
            f"SELECT {_DOC_COLUMNS} WHERE ($1::text IS NULL OR d.project = $1) "
            "AND ($2::text IS NULL OR d.status = $2) ORDER BY d.updated_at DESC, d.document_id "
            "LIMIT $3", project, status, limit)
        return [dict(r) for r in rows]

    async def latest_version(self, document_id: str) -> Optional[dict[str, Any]]:
        """The newest registered version of a document, or None."""
        row = await self.pool.fetchrow(
            "SELECT * FROM document_versions WHERE document_id = $1 ORDER BY version DESC LIMIT 1",
            document_id)
        return dict(row) if row else None
