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
from typing import Any, Mapping, Optional, Sequence

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
        try:
            result = await queue_from_latest(project, row, store=store, metadata=metadata,
                                             producer=producer, callback_url=row["callback_url"],
                                             new_version=True)
        except DocumentGone:  # deleted since it was listed: a delete always wins
            continue
        sent.append(Reprocessed(local_id(project, row["document_id"]), row["version"], result.version))
    return sent


async def queue_from_latest(project: str, latest: Mapping[str, Any], *, store: ObjectStore,
                            metadata: Metadata, producer, callback_url: Optional[str],
                            user_metadata: Optional[dict] = None,
                            new_version: bool = False) -> IngestResult:
    """Register and queue a version of a document from the bytes of its ``latest``
    version (a ``document_versions`` row: document_id (scoped), category, filename,
    sha256, size, raw_key, content_type): the raw object is copied server-side to the
    new version's key.  With ``user_metadata`` a new version only when it differs
    from the latest's (``queued=False`` otherwise); with ``new_version`` always.
    Shared by ``ragstream reprocess``, ``POST /v1/documents/{id}/reprocess`` and
    ``PUT /v1/documents/{id}/metadata`` (api/same_bytes.py).  Raises DocumentGone when
    a delete covers the latest version (checked under the ledger's lock)."""
    async def put_raw(key: str) -> None:
        await store.copy(latest["raw_key"], key)

    return await queue_version(
        project=project, category=latest["category"], filename=latest["filename"],
        sha256=latest["sha256"], size=latest["size"],
        content_type=latest.get("content_type") or "application/octet-stream", store=store,
        metadata=metadata, producer=producer, put_raw=put_raw,
        document_id=local_id(project, latest["document_id"]), callback_url=callback_url,
        user_metadata=user_metadata, require_live=True, new_version=new_version)
