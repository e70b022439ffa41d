"""``/v1/projects``: admin routes over whole projects (an admin key only,
``ragstream apikey create --admin``).

``DELETE /v1/projects/{project}``: revoke the project's keys, send a delete for each
of its live documents and drop its Milvus collections (streams/project_erasure.py,
the same as ``ragstream project delete P --yes``); 202 with what was done.
"""
from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from adapters.collection_names import InvalidProjectName, check_project
from api.auth import get_state, require_admin
from api.state import ApiState
from streams.project_erasure import delete_project

router = APIRouter(prefix="/v1", tags=["projects"])


class ProjectDeleted(BaseModel):
    """202 answer to a project delete."""

    project: str
    documents_deleted: int = Field(description="documents sent a delete now")
    already_deleted: int = Field(description="documents deleted before")
    keys_revoked: int
    dropped: list[str] = Field(description="Milvus aliases and collections dropped")


@router.delete("/projects/{project}", status_code=202, response_model=ProjectDeleted,
               dependencies=[Depends(require_admin)],
               responses={403: {"description": "not an admin key"}, 422: {"description": "not a project name"}})
async def delete_project_route(project: str, state: ApiState = Depends(get_state)) -> ProjectDeleted:
    """Delete every document, collection and key of ``project`` (idempotent)."""
    try:
        check_project(project)
    except InvalidProjectName as exc:
        raise HTTPException(422, str(exc)) from exc
    report = await delete_project(project, metadata=state.metadata, producer=state.producer,
                                  store=state.vectors, bucket=state.store.bucket)
    return ProjectDeleted(**report.as_dict())
