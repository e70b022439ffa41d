"""Parts of a document version that failed for good while the rest went on (partial
success, issue 28 item 4), in PostgreSQL table ``version_failed_parts``
(revision 0007_partial_success).

A *part* is a page range or unit range of a split document (named ``pages 33-64``
or ``part 3 of 9``), recorded by the partition stage when its task fails
permanently and the profile allows partial documents (agents/partition.py
``salvage_part``), or an attachment or embedded part the parser skipped (named as
the parser reported it, code ``skipped``), recorded by the chunk stage.  The index
stage's COMPLETED announcement reads them (agents/outcomes.py): a version with any
is COMPLETED with ``partial: true`` and the list.  Rows are keyed by
(document id, version, part): recording one twice (a redelivery) changes nothing.
A delete removes them (adapters/erasure.py).
"""
from __future__ import annotations

from typing import Sequence

import asyncpg

#: at most this many parts are listed in a status event (the rest are counted)
MAX_LISTED = 50


async def record_failed_parts(pool: asyncpg.Pool, document_id: str, version: int,
                              parts: Sequence[tuple[str, str, str]]) -> None:
    """Record ``parts`` — ``(part name, failure code, reason sentence)`` — of a
    version (idempotent: a part already recorded keeps its first row)."""
    if not parts:
        return
    await pool.executemany(
        "INSERT INTO version_failed_parts (document_id, version, part, code, reason)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        [(document_id, int(version), name[:200], code[:64], reason[:1000]) for name, code, reason in parts])


async def failed_parts(pool: asyncpg.Pool, document_id: str, version: int) -> list[dict[str, str]]:
    """The version's failed parts as ``[{"part", "code", "reason"}]`` in the order they
    were recorded (at most :data:`MAX_LISTED`; ``[]`` when every part worked)."""
    rows = await pool.fetch(
        "SELECT part, code, reason FROM version_failed_parts WHERE document_id = $1 AND version = $2"
        " ORDER BY at, part LIMIT $3", document_id, int(version), MAX_LISTED)
    return [{"part": r["part"], "code": r["code"], "reason": r["reason"]} for r in rows]


async def erase_failed_parts(pool: asyncpg.Pool, document_id: str, up_to_version: int) -> None:
    """Remove the failed-part rows of versions 1..``up_to_version`` and the list in the
    status projection (a deleted document's reasons may name its attachments)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("DELETE FROM version_failed_parts WHERE document_id = $1 AND version <= $2",
                           document_id, int(up_to_version))
        await conn.execute("UPDATE documents SET failed_parts = NULL WHERE document_id = $1"
                           " AND version <= $2 AND failed_parts IS NOT NULL", document_id, int(up_to_version))
