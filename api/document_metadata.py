"""``PUT /v1/documents/{id}/metadata``: replace a document's user metadata.

A metadata change is a new version of the same bytes (``Metadata.register_version``:
different metadata, same sha256 → version n+1), queued like any upload: its raw
object is a server-side copy of the latest version's, so no bytes pass through the
API, and its chunks' vectors all come from the embedding cache (same texts, same
model: adapters/embedding_cache.py), so nothing is embedded again.  Search keeps
answering from version n until n+1 is COMPLETED, then shows the new metadata.

Errors: 401, 404 (no such document in the key's project, or it was deleted), 409
(its latest version FAILED: upload the file again), 422 (bad metadata).
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.auth import get_state, require_project
from api.documents import UploadAccepted, owned_document, status_url
from api.state import ApiState
from adapters.metadata import DocumentGone
from schemas import DocumentStatus, status_event
from schemas.user_metadata import check_metadata
from streams.ingest import queue_version

router = APIRouter(prefix="/v1", tags=["documents"])


class MetadataUpdate(BaseModel):
    """The new user metadata (replaces the old; ``{}`` clears it)."""

    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(description="schemas/user_metadata.py says what it may hold")

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_metadata(v)


@router.put("/documents/{document_id}/metadata", status_code=202, response_model=UploadAccepted,
            responses={404: {"description": "no such document in this key's project"},
                       409: {"description": "the latest version failed"},
                       422: {"description": "bad metadata"}})
async def put_metadata(document_id: str, body: MetadataUpdate, project: str = Depends(require_project),
                       state: ApiState = Depends(get_state)) -> UploadAccepted:
    """Queue version n+1 of the document with the same bytes and ``body.metadata``
    (``queued=false`` when the metadata is unchanged)."""
    row = await owned_document(state, document_id, project)
    if row["status"] == DocumentStatus.DELETED.value:
        raise HTTPException(404, "document not found")
    latest = await state.metadata.latest_version(row["document_id"])
    if latest is None:
        raise HTTPException(404, "document not found")
    if row["status"] == DocumentStatus.FAILED.value and row["version"] == latest["version"]:
        raise HTTPException(409, "the document's latest version failed: upload the file again")
    store, source_key = state.store, latest["raw_key"]

    async def put_raw(raw_key: str) -> None:  # server-side copy of the latest version's bytes
        await store.client.copy_object(Bucket=store.bucket, Key=raw_key,
                                       CopySource={"Bucket": store.bucket, "Key": source_key},
                                       MetadataDirective="COPY")

    try:
        result = await queue_version(
            project=project, category=latest["category"], filename=latest["filename"],
            sha256=latest["sha256"], size=latest["size"],
            content_type=latest.get("content_type") or "application/octet-stream", store=store,
            metadata=state.metadata, producer=state.producer, put_raw=put_raw, document_id=document_id,
            callback_url=row.get("callback_url"), user_metadata=body.metadata, require_live=True)
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
