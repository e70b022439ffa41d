"""API-key authentication: header ``X-API-Key``, one project per key.

No key, or an unknown/revoked/malformed one → 401.  A key only ever sees its own
project: other projects' documents answer 404, as if they did not exist.
"""
from __future__ import annotations

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader

from api.state import ApiState

API_KEY_HEADER = "X-API-Key"
api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False,
                              description="A project's API key (`ragstream apikey create --project P`)")


def get_state(request: Request) -> ApiState:
    """The app's :class:`ApiState`."""
    return request.app.state.api


async def require_project(key: str | None = Security(api_key_header),
                          state: ApiState = Depends(get_state)) -> str:
    """The project of the request's API key.  Raises HTTPException 401."""
    project = await state.keys.verify(key)
    if project is None:
        raise HTTPException(401, "missing or invalid API key", headers={"WWW-Authenticate": API_KEY_HEADER})
    return project
