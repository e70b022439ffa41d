"""Deleting a whole project (``ragstream project delete P``, ``DELETE /v1/projects/{p}``
with an admin key).

1. The project's API keys are revoked first, so nothing new arrives while it goes.
2. Every document of the project whose latest version is not already deleted gets a
   delete request (:func:`streams.ingest.queue_delete`, the same path as a
   document's DELETE: the ledger tombstone first, then normalize removes its chunks,
   objects and content and marks it DELETED).
3. Every Milvus alias and physical collection of the project is dropped (the
   aliases ``chunks_P``, ``chunks_P__test`` and their ``__previous`` memories, and
   every ``chunks_P__v{n}``): no older collection keeps a copy a rollback could
   bring back.
4. The project's callback secret goes.

Idempotent: a second call finds the documents deleted and nothing in Milvus, and
does nothing more.  The document ids stay registered (as DELETED), so an id is
never reused for other content.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from adapters import collection_aliases as ca
from adapters.collection_names import check_project
from adapters.metadata import Metadata
from adapters.vector_store import ALIASES, VectorStore, alias_for
from streams.ingest import queue_delete

LIVE_DOCUMENTS_SQL = """
SELECT DISTINCT ON (v.document_id) v.document_id, v.version, v.category, v.filename, v.raw_key,
       v.sha256, v.size, v.callback_url, coalesce(x.up_to_version, 0) AS deleted_up_to
FROM document_versions v LEFT JOIN document_deletions x ON x.document_id = v.document_id
WHERE v.project = $1
ORDER BY v.document_id, v.version DESC
"""


@dataclass
class ProjectDeletion:
    """What :func:`delete_project` did: documents sent a delete, documents already
    deleted, API keys revoked, Milvus aliases and collections dropped."""

    project: str
    documents_deleted: int = 0
    already_deleted: int = 0
    keys_revoked: int = 0
    dropped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def drop_project_collections(store: VectorStore, project: str) -> list[str]:
    """Drop every alias (prod, test and their ``__previous``) and every physical
    collection of ``project``, blocking; returns the names dropped."""
    dropped = []
    for kind in ALIASES:
        alias = alias_for(project, kind)
        for name in (alias, ca.previous_alias(alias)):
            if ca.alias_target(store, name) is not None:
                ca.drop_alias(store, name)
                dropped.append(name)
    for name in ca.physical_versions(store, project).values():
        store.run_gated("drop_collection", lambda c, n=name: c.drop_collection(n))
        dropped.append(name)
    store.forget(project)
    return dropped


async def delete_project(project: str, *, metadata: Metadata, producer, store: VectorStore,
                         bucket: str) -> ProjectDeletion:
    """Delete every document of ``project`` and drop its Milvus collections (module
    docstring).  ``bucket``: the object store's bucket (for the delete events).
    Raises InvalidProjectName."""
    check_project(project)
    report = ProjectDeletion(project)
    report.keys_revoked = int((await metadata.pool.execute(
        "UPDATE api_keys SET revoked_at = now() WHERE project = $1 AND revoked_at IS NULL",
        project)).split()[-1])
    for row in await metadata.pool.fetch(LIVE_DOCUMENTS_SQL, project):
        if row["deleted_up_to"] >= row["version"]:
            report.already_deleted += 1
            continue
        await queue_delete(document_id=row["document_id"], version=row["version"], project=project,
                           category=row["category"], filename=row["filename"], bucket=bucket,
                           key=row["raw_key"], sha256=row["sha256"], size=row["size"],
                           producer=producer, metadata=metadata, callback_url=row["callback_url"])
        report.documents_deleted += 1
    report.dropped = await asyncio.to_thread(drop_project_collections, store, project)
    await metadata.pool.execute("DELETE FROM project_secrets WHERE project = $1", project)
    return report
