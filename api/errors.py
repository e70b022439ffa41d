"""Error answers that never fail to encode and never echo what the client sent.

FastAPI's own handlers answered 500 to hostile input twice (the API fuzz and a
newcomer's attack, 2026-12-04): a 422 for ``POST /v1/documents`` with the body
``\\x00`` carried the raw bytes, and a 422 for ``POST /v1/search`` with the query
``"\\ud800"`` (a lone surrogate) carried a string UTF-8 cannot encode.  Here every
validation error is answered without its ``input``, ``ctx`` and ``url``, and every
string of an error's detail (messages, locations, which can hold a JSON key the client
chose) is made encodable (``backslashreplace``) -- for every route at once.
"""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.utils import is_body_allowed_for_status_code
from starlette.exceptions import HTTPException as StarletteHTTPException

DROPPED = ("input", "ctx", "url")


def encodable(value: Any) -> Any:
    """``value`` with every string (in lists, tuples and dict keys/values too) made
    UTF-8 encodable and every bytes value decoded with replacement; other values as
    they are.  Tuples become lists (as JSON has them)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return {encodable(str(k)): encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encodable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return encodable(str(value))


def validation_detail(errors: list[dict]) -> list[dict]:
    """Pydantic/FastAPI ``errors()`` for a 422: type, loc and msg only, encodable."""
    return [encodable({k: v for k, v in e.items() if k not in DROPPED}) for e in errors]


def install_error_handlers(app: FastAPI) -> None:
    """Answer request-validation errors (422) and HTTP errors with encodable details
    that hold no client input."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_detail(list(exc.errors()))}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        headers = getattr(exc, "headers", None)
        if not is_body_allowed_for_status_code(exc.status_code):
            return Response(status_code=exc.status_code, headers=headers)
        detail = exc.detail
        if isinstance(detail, list) and all(isinstance(e, dict) for e in detail):
            detail = validation_detail(detail)
        return JSONResponse({"detail": encodable(detail)}, status_code=exc.status_code,
                            headers=headers)
