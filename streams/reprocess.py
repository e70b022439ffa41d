"""Run live documents through the pipeline again from their originals
(``ragstream reprocess``).

Each live document of a project (its latest version not covered by a delete; FAILED
ones included), or only the ones named, gets a new version of the same bytes: the
raw object of its latest version is copied server-side to the new version's raw key
(``adapters.object_store.ObjectStore.copy``), the version is registered with its
category, file name, callback URL and user metadata unchanged
(``Metadata.register_version(new_version=True)``), and its QUEUED status and upload
event are sent (``streams.ingest.queue_version``).  From there it is an upload like
any other: every stage runs, the new version's chunks replace the old one's in the
project's collection when it completes, and the callback URL hears of the new
version.  Embeddings of unchanged chunk text come from the embedding cache.

What it is for:

* **Kafka lost** (README "Backups and restore"): the topics that ``ragstream
  reindex`` replays are gone, but PostgreSQL (the ledger, the data keys) and the
  object store's ``raw/`` survive; reprocessing every project's documents refills
  ``embeddings`` and the collections from the originals.
* A parser, chunking or profile change that should reach documents already indexed.

Errors: ``DocumentNotFound`` for a named document the project does not hold (nothing
is sent for any), the object store's ``ObjectNotFound`` for a version whose raw object
is missing (the documents before it are already queued; run again for the rest),
asyncpg's and the broker's errors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from adapters.metadata import DocumentGone, Metadata
from adapters.object_store import ObjectStore
from streams.document_ids import local_id, scoped_id
from streams.ingest import DocumentNotFound, IngestResult, queue_version

_LIVE = """
SELECT v.document_id, v.version, v.category, v.filename, v.sha256, v.size, v.raw_key,
       v.callback_url, v.content_type
FROM document_versions v
WHERE v.project = $1
  AND v.version = (SELECT max(version) FROM document_versions w WHERE w.document_id = v.document_id)
  AND NOT EXISTS (SELECT 1 FROM document_deletions d
                  WHERE d.document_id = v.document_id AND d.up_to_version >= v.version)
  AND ($2::text[] IS NULL OR v.document_id = ANY($2::text[]))
ORDER BY v.document_id
"""


@dataclass(frozen=True)
class Reprocessed:
    """One document sent again: its project-local id, the version it had and the new one."""

    document_id: str
    previous: int
    version: int


async def live_versions(metadata: Metadata, project: str,
                        document_ids: Optional[Sequence[str]] = None) -> list[dict]:
    """The latest version of every live document of ``project`` (or of the named
    project-local ids), ordered by id; each row ``{document_id (scoped), version,
    category, filename, sha256, size, raw_key, callback_url, content_type}``.
    Raises DocumentNotFound naming the first requested id that is not live."""
    scoped = [scoped_id(project, d) for d in document_ids] if document_ids else None
    rows = [dict(r) for r in await metadata.pool.fetch(_LIVE, project, scoped)]
    if scoped:
        missing = sorted(set(scoped) - {r["document_id"] for r in rows})
        if missing:
            raise DocumentNotFound(f"no live document {local_id(project, missing[0])!r} in project {project!r}")
    return rows


async def reprocess(project: str, *, store: ObjectStore, metadata: Metadata, producer,
                    document_ids: Optional[Sequence[str]] = None) -> list[Reprocessed]:
    """Queue a new version of each live document of ``project`` (module docstring);
    returns what was sent, in id order.  A document deleted between the listing and
    its turn is left out (the ledger's check under the document's lock: a delete
    always wins, as for a metadata update)."""
    sent: list[Reprocessed] = []
    for row in await live_versions(metadata, project, document_ids):
        async def put_raw(key: str, src: str = row["raw_key"]) -> None:
            await store.copy(src, key)

        try:
            result: IngestResult = await queue_version(
                project=project, category=row["category"], filename=row["filename"], sha256=row["sha256"],
                size=row["size"], content_type=row["content_type"] or "application/octet-stream",
                store=store, metadata=metadata, producer=producer, put_raw=put_raw,
                document_id=local_id(project, row["document_id"]), callback_url=row["callback_url"],
                new_version=True, require_live=True)
        except DocumentGone:  # deleted since it was listed: a delete always wins
            continue
        sent.append(Reprocessed(local_id(project, row["document_id"]), row["version"], result.version))
    return sent
