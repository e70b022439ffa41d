"""API-key authentication: header ``X-API-Key``, one project per key.

No key, or an unknown/revoked/malformed one → 401.  A key only ever sees its own
project: other projects' documents answer 404, as if they did not exist.
"""
from __future__ import annotations

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader

from adapters.api_keys import ADMIN_SCOPE
from api.state import ApiState

API_KEY_HEADER = "X-API-Key"
api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False,
                              description="A project's API key (`ragstream apikey create --project P`)")


def get_state(request: Request) -> ApiState:
    """The app's :class:`ApiState`."""
    return request.app.state.api


async def _key_scope(key: str | None, state: ApiState) -> str:
    scope = await state.keys.verify(key)
    if scope is None:
        raise HTTPException(401, "missing or invalid API key", headers={"WWW-Authenticate": API_KEY_HEADER})
    return scope


async def require_project(key: str | None = Security(api_key_header),
                          state: ApiState = Depends(get_state)) -> str:
    """The project of the request's API key.  Raises HTTPException 401, or 403 for an
    admin key (it belongs to no project, so it reads and writes no project's data)."""
    project = await _key_scope(key, state)
    if project == ADMIN_SCOPE:
        raise HTTPException(403, "an admin key has no project: use a project's key")
    return project


async def require_admin(key: str | None = Security(api_key_header),
                        state: ApiState = Depends(get_state)) -> None:
    """Only an admin key (``ragstream apikey create --admin``) passes; 401 for no or
    a bad key, 403 for a project's key."""
    if await _key_scope(key, state) != ADMIN_SCOPE:
        raise HTTPException(403, "this route needs an admin key")
