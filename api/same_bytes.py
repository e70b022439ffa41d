"""A new version of a document from the bytes it already has: the shared tail of
``PUT /v1/documents/{id}/metadata`` (api/document_metadata.py) and ``POST
/v1/documents/{id}/reprocess`` (api/reprocess.py).

The raw object of the latest version is copied server-side to the new version's raw
key and the version is registered and queued like an upload
(``streams.reprocess.queue_from_latest``, which ``ragstream reprocess`` uses too: no
bytes pass through the API); its QUEUED row is projected at once so the answer's
status is current.
"""
from __future__ import annotations

from typing import Any, Optional

from fastapi import HTTPException

from adapters.metadata import DocumentGone
from api.documents import UploadAccepted, owned_document, status_url
from api.state import ApiState
from schemas import DocumentStatus, status_event
from streams.reprocess import queue_from_latest


async def queue_same_bytes(state: ApiState, document_id: str, project: str, *,
                           user_metadata: Optional[dict[str, Any]] = None,
                           new_version: bool = False, allow_failed: bool = False) -> UploadAccepted:
    """Queue version n+1 of the key's project's ``document_id`` with the latest
    version's bytes: with ``user_metadata`` (a new version only when it differs:
    ``queued=false`` otherwise), or unconditionally with ``new_version``.
    Raises HTTPException 404 (no such live document in ``project``) and, unless
    ``allow_failed``, 409 when its latest version FAILED."""
    row = await owned_document(state, document_id, project)
    if row["status"] == DocumentStatus.DELETED.value:
        raise HTTPException(404, "document not found")
    latest = await state.metadata.latest_version(row["document_id"])
    if latest is None:
        raise HTTPException(404, "document not found")
    if not allow_failed and row["status"] == DocumentStatus.FAILED.value and row["version"] == latest["version"]:
        raise HTTPException(409, "the document's latest version failed: upload the file again")
    try:
        result = await queue_from_latest(project, latest, store=state.store, metadata=state.metadata,
                                         producer=state.producer, callback_url=row.get("callback_url"),
                                         user_metadata=user_metadata, new_version=new_version)
    except DocumentGone:  # a delete got there first (checked under the registry's lock)
        raise HTTPException(404, "document not found") from None
    if result.queued:
        await state.metadata.apply_status(status_event(
            result.document_id, result.version, DocumentStatus.QUEUED, stage="upload",
            project=project, filename=latest["filename"], callback_url=row.get("callback_url")))
    now = await state.metadata.get_document(result.document_id)
    return UploadAccepted(
        document_id=result.local_id, version=result.version,
        status=now["status"] if now else DocumentStatus.QUEUED.value, queued=result.queued,
        reason=result.reason, sha256=latest["sha256"], size=latest["size"],
        status_url=status_url(result.local_id), filename=latest["filename"])
