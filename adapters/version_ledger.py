"""The delivery ledger in PostgreSQL: what is true of each document version,
written synchronously, so stages can decide without waiting for the status
projection (which lags the changelog).

Tables (created by the revisions in adapters/migrations/):

- ``version_outcomes`` — the ONE terminal outcome of a version, COMPLETED or FAILED:
  the first writer wins (``claim_outcome``), so a version never ends both ways and
  fires one callback.  ``announced`` is set once its status event was sent; a
  redelivered event of a claimed but unannounced version re-announces it.
- ``document_deletions`` — a tombstone per document: every version up to
  ``up_to_version`` is deleted.  Written by the uploader before the delete event is
  produced, so a version still in flight sees it the moment it is written.
- ``version_steps`` — steps done for a version (e.g. ``chunk``), so an event that is
  redelivered, or the second of two page ranges finishing together, does not redo
  them.

Together with ``document_versions`` (the latest registered version) this answers
:meth:`VersionLedger.state`: is the work for ``(document, version)`` still wanted?
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import asyncpg

@dataclass(frozen=True)
class Outcome:
    """A version's terminal outcome: ``outcome`` is ``"COMPLETED"`` or ``"FAILED"``;
    ``chunks`` the indexed chunk count (COMPLETED); ``reason`` why it FAILED;
    ``at`` when it was claimed (Unix seconds, from the row's ``at`` column; None
    only for an Outcome not read from the ledger): the ``at`` of its status event,
    so announcing it again after a crash re-sends the same event instead of a
    second emission."""

    document_id: str
    version: int
    project: str
    outcome: str
    chunks: int
    reason: Optional[str]
    announced: bool
    at: Optional[float] = None


@dataclass(frozen=True)
class VersionState:
    """What the ledger says about one ``(document, version)``.

    ``latest_version``: the newest registered version (0 when none);
    ``deleted_up_to``: tombstone (0 when never deleted); ``outcome``: this version's
    terminal outcome, if any; ``current_completed``: the newest COMPLETED version
    above the tombstone (0 when none).
    """

    document_id: str
    version: int
    latest_version: int
    deleted_up_to: int
    outcome: Optional[Outcome]
    current_completed: int

    @property
    def superseded(self) -> bool:
        """A newer version was registered: work for this one is not wanted."""
        return self.version < self.latest_version

    @property
    def deleted(self) -> bool:
        """The document was deleted at or after this version."""
        return self.deleted_up_to >= self.version

    @property
    def skip_reason(self) -> Optional[str]:
        """Why work for this version must not run (None when it must)."""
        if self.deleted:
            return "deleted"
        if self.superseded:
            return f"superseded by v{self.latest_version}"
        if self.outcome is not None:
            return f"already {self.outcome.outcome}"
        return None


STATE_SQL = """
SELECT
  (SELECT coalesce(max(version), 0) FROM document_versions WHERE document_id = $1) AS latest,
  (SELECT coalesce(max(up_to_version), 0) FROM document_deletions WHERE document_id = $1) AS deleted,
  (SELECT coalesce(max(o.version), 0) FROM version_outcomes o
    WHERE o.document_id = $1 AND o.outcome = 'COMPLETED'
      AND o.version > (SELECT coalesce(max(up_to_version), 0) FROM document_deletions
                       WHERE document_id = $1)) AS current_completed
"""


class VersionLedger:
    """Ledger operations over an asyncpg pool (see the module docstring)."""

    def __init__(self, pool: asyncpg.Pool):
        self.pool = pool

    async def state(self, document_id: str, version: int) -> VersionState:
        """The ledger's view of ``(document_id, version)``: one round trip."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(STATE_SQL, document_id)
            out = await conn.fetchrow(
                "SELECT * FROM version_outcomes WHERE document_id = $1 AND version = $2",
                document_id, version)
        return VersionState(document_id, version, row["latest"], row["deleted"],
                            _outcome(out), row["current_completed"])

    async def claim_outcome(self, *, document_id: str, version: int, project: str,
                            outcome: str, chunks: int = 0, reason: Optional[str] = None) -> Outcome:
        """Record ``outcome`` for the version unless it already has one; returns the
        version's outcome (ours, or the one that won earlier)."""
        async with self.pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO version_outcomes (document_id, version, project, outcome, chunks, reason)"
                " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                document_id, version, project, outcome, chunks, reason)
            row = await conn.fetchrow(
                "SELECT * FROM version_outcomes WHERE document_id = $1 AND version = $2",
                document_id, version)
        return _outcome(row)

    async def mark_announced(self, document_id: str, version: int) -> None:
        """The outcome's status event was sent."""
        await self.pool.execute(
            "UPDATE version_outcomes SET announced = true WHERE document_id = $1 AND version = $2",
            document_id, version)

    async def record_deletion(self, document_id: str, project: str, up_to_version: int,
                              through_latest: bool = False) -> int:
        """Tombstone: versions ``<= up_to_version`` of the document are deleted; with
        ``through_latest``, every version registered by now too, read under the
        registry's per-document lock (adapters/metadata.register_version takes the
        same), so a version registered while the delete was on its way (a metadata
        PUT racing a DELETE: a newcomer's finding, 2026-12-05) is deleted instead of
        outliving it.  Returns the version the tombstone covers up to."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", document_id)
            return int(await conn.fetchval(
                "INSERT INTO document_deletions (document_id, project, up_to_version)"
                " VALUES ($1, $2, GREATEST($3::int, CASE WHEN $4 THEN (SELECT coalesce(max(version), 0)"
                "                  FROM document_versions WHERE document_id = $1) ELSE 0 END))"
                " ON CONFLICT (document_id) DO UPDATE SET up_to_version ="
                " GREATEST(document_deletions.up_to_version, EXCLUDED.up_to_version), at = now()"
                " RETURNING up_to_version", document_id, project, up_to_version, through_latest))

    async def step_done(self, document_id: str, version: int, step: str) -> bool:
        """True once :meth:`mark_step` ran for this version and step."""
        return bool(await self.pool.fetchval(
            "SELECT 1 FROM version_steps WHERE document_id = $1 AND version = $2 AND step = $3",
            document_id, version, step))

    async def mark_step(self, document_id: str, version: int, step: str) -> None:
        """Remember that ``step`` is done for the version (idempotent)."""
        await self.pool.execute(
            "INSERT INTO version_steps (document_id, version, step) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING", document_id, version, step)

    async def current_versions(self, document_ids: list[str]) -> dict[str, int]:
        """For each id, the version search may show: its newest COMPLETED version above
        its tombstone.  Documents without one are absent from the result."""
        rows = await self.pool.fetch(
            "SELECT o.document_id, max(o.version) AS v FROM version_outcomes o"
            " LEFT JOIN document_deletions d ON d.document_id = o.document_id"
            " WHERE o.document_id = ANY($1::text[]) AND o.outcome = 'COMPLETED'"
            "   AND o.version > coalesce(d.up_to_version, 0)"
            " GROUP BY o.document_id", document_ids)
        return {r["document_id"]: r["v"] for r in rows}


def _outcome(row) -> Optional[Outcome]:
    if row is None:
        return None
    return Outcome(row["document_id"], row["version"], row["project"], row["outcome"],
                   row["chunks"], row["reason"], row["announced"], row["at"].timestamp())
