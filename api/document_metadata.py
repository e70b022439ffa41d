"""``PUT /v1/documents/{id}/metadata``: replace a document's user metadata.

A metadata change is a new version of the same bytes (``Metadata.register_version``:
different metadata, same sha256 → version n+1), queued like any upload: its raw
object is a server-side copy of the latest version's (api/same_bytes.py), so no
bytes pass through the API, and its chunks' vectors all come from the embedding cache
(same texts, same model: adapters/embedding_cache.py), so nothing is embedded again.  Search keeps
answering from version n until n+1 is COMPLETED, then shows the new metadata.

Errors: 401, 404 (no such document in the key's project, or it was deleted), 409
(its latest version FAILED: upload the file again), 422 (bad metadata).
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.auth import get_state, require_project
from api.documents import UploadAccepted
from api.same_bytes import queue_same_bytes
from api.state import ApiState
from schemas.user_metadata import check_metadata

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
    return await queue_same_bytes(state, document_id, project, user_metadata=body.metadata)
