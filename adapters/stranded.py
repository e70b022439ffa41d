"""Stranded document versions, and queueing them again (``ragstream requeue``).

A version is *stranded* when its upload event was sent (``queued_at`` set) but it
has no outcome, no delete covers it, and nothing about it moved for a long time:
its next record was lost before a stage read it.  The intermediate topics
(``partition-tasks``, ``page-ranges``, ``elements``, ``chunks``: topics/catalogue.py) keep records
for 7 days; a backlog older than that loses its oldest records to retention, and a
consumer group whose offset fell off the log restarts at the earliest record left
(``auto_offset_reset=earliest``), so the versions whose records were deleted stay at
their last status for ever (README, "Topic retention and capacity").

Queueing one again needs no broker here: its ledger steps are forgotten
(``version_steps``: a stage skips a step already marked) and its outbox mark is
cleared (``queued_at`` NULL), so the normalize worker's upload sweep
(agents/normalize.sweep_unqueued) sends its upload event again within
``upload_sweep_interval_s``, from the raw object that every version keeps, and the
pipeline runs it from the start.  Every stage is idempotent (deterministic keys,
upserts), so a version that was only slow, not stranded, is processed twice at worst.
Errors: asyncpg's.
"""
from __future__ import annotations

from typing import Any, Optional

import asyncpg

_STRANDED = """
SELECT v.document_id, v.version, v.project, v.queued_at,
       doc.status, doc.updated_at AS status_at
FROM document_versions v
LEFT JOIN documents doc ON doc.document_id = v.document_id
WHERE v.queued_at IS NOT NULL
  AND greatest(v.queued_at, coalesce(doc.updated_at, v.queued_at)) < now() - make_interval(secs => $1)
  AND v.version = (SELECT max(version) FROM document_versions w WHERE w.document_id = v.document_id)
  AND NOT EXISTS (SELECT 1 FROM version_outcomes o
                  WHERE o.document_id = v.document_id AND o.version = v.version)
  AND NOT EXISTS (SELECT 1 FROM document_deletions d
                  WHERE d.document_id = v.document_id AND d.up_to_version >= v.version)
  AND ($2::text IS NULL OR v.project = $2)
ORDER BY v.queued_at
LIMIT $3
"""


async def stranded_versions(pool: asyncpg.Pool, stuck_for_s: float, project: Optional[str] = None,
                            limit: int = 1000) -> list[dict[str, Any]]:
    """The newest versions of documents, sent more than ``stuck_for_s`` seconds ago,
    with no outcome (COMPLETED/FAILED), no delete and no status change in that time,
    oldest first; each ``{document_id, version, project, queued_at, status,
    status_at}`` (``status`` None when no status of it was ever projected)."""
    rows = await pool.fetch(_STRANDED, float(stuck_for_s), project, int(limit))
    return [dict(r) for r in rows]


async def requeue(pool: asyncpg.Pool, versions: list[dict[str, Any]]) -> int:
    """Forget the ledger steps of each of ``versions`` (``{document_id, version}``) and
    clear its outbox mark, in one transaction; returns how many were reset.  The
    normalize worker's sweep then sends each again (module docstring)."""
    reset = 0
    async with pool.acquire() as conn, conn.transaction():
        for v in versions:
            await conn.execute("DELETE FROM version_steps WHERE document_id = $1 AND version = $2",
                               v["document_id"], int(v["version"]))
            status = await conn.execute(
                "UPDATE document_versions SET queued_at = NULL"
                " WHERE document_id = $1 AND version = $2 AND queued_at IS NOT NULL",
                v["document_id"], int(v["version"]))
            reset += int(status.split()[-1])
    return reset
