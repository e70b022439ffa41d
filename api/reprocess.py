"""``POST /v1/documents/{id}/reprocess``: run a document through the pipeline again
from its original, as a new version (the HTTP side of ``ragstream reprocess``,
streams/reprocess.py).

The new version has the latest version's bytes (a server-side copy:
api/same_bytes.py), category, file name, callback URL and user metadata; every stage
runs again, its chunks replace the old version's when it completes, and search
answers from the old version until then.  A latest version that FAILED may be
reprocessed (e.g. after a parser fix); a deleted document may not.

Errors: 401, 404 (no such live document in the key's project).
"""
from __future__ import annotations

from fastapi import APIRouter, Depends

from api.auth import get_state, require_project
from api.documents import UploadAccepted
from api.same_bytes import queue_same_bytes
from api.state import ApiState

router = APIRouter(prefix="/v1", tags=["documents"])


@router.post("/documents/{document_id}/reprocess", status_code=202, response_model=UploadAccepted,
             responses={404: {"description": "no such live document in this key's project"}})
async def post_reprocess(document_id: str, project: str = Depends(require_project),
                         state: ApiState = Depends(get_state)) -> UploadAccepted:
    """Queue version n+1 of the document from its latest version's bytes (always a new
    version: ``queued`` is true)."""
    return await queue_same_bytes(state, document_id, project, new_version=True, allow_failed=True)
