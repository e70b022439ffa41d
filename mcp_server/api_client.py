"""The MCP server's client of ragstream's HTTP API (httpx): one method per route the
tools use, every call with the one API key ``X-API-Key`` the server holds.

The API is the authority on everything a caller sends (ids, categories, filters, page
ranges, sizes): bodies go to it as they are and its 4xx answers come back as
:class:`ApiCallFailed` with its own message, so a rule is kept in one place.  JSON is
encoded ASCII-only here, so any string a caller sends (a lone surrogate too) reaches
the API intact and is answered there.
"""
from __future__ import annotations

import json
from typing import Any, Optional
from urllib.parse import quote

import httpx

from streams.document_ids import check_document_id

DETAIL_MAX_CHARS = 1000  # of an API error message passed on to the caller


class ApiCallFailed(Exception):
    """A call the API refused or never answered.  ``status``: the HTTP status (None
    when there was no answer); the message is for the caller and holds no key."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


def _detail(response: httpx.Response) -> str:
    """The API's ``detail`` as one line: a string as it is, a validation error list as
    ``loc: msg; …``; cut at DETAIL_MAX_CHARS."""
    try:
        detail: Any = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    if isinstance(detail, list):
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', []) if p != 'body')}: {e.get('msg', '')}"
            if isinstance(e, dict) else str(e) for e in detail)
    text = " ".join(str(detail).split())
    return text if len(text) <= DETAIL_MAX_CHARS else text[:DETAIL_MAX_CHARS] + " …"


class RagstreamApi:
    """ragstream's HTTP API at ``base_url`` (e.g. ``http://127.0.0.1:8080``) with the
    project key ``api_key``; each call gives up after ``timeout_s`` seconds.

    Use as ``async with RagstreamApi(...) as api``.  Every method returns the API's
    JSON answer (a dict) or raises ApiCallFailed."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float):
        if not api_key:
            raise ValueError("no API key: set RAGSTREAM_MCP_API_KEY to a project's key "
                             "(ragstream apikey create --project P)")
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(base_url=self.base_url, headers={"X-API-Key": api_key},
                                         timeout=timeout_s, follow_redirects=False)

    async def __aenter__(self) -> "RagstreamApi":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        try:
            response = await self._client.request(method, path, **kw)
        except httpx.TimeoutException:
            raise ApiCallFailed(f"the ragstream API at {self.base_url} did not answer within "
                                f"{self._client.timeout.read} s") from None
        except httpx.TransportError as exc:
            raise ApiCallFailed(f"cannot reach the ragstream API at {self.base_url} "
                                f"({type(exc).__name__}); is `ragstream api` running?") from None
        if response.status_code == 401:
            raise ApiCallFailed("the ragstream API refused the MCP server's key "
                                "(RAGSTREAM_MCP_API_KEY): " + _detail(response), 401)
        if response.status_code >= 400:
            raise ApiCallFailed(f"the ragstream API answered {response.status_code}: "
                                f"{_detail(response)}", response.status_code)
        return response.json()

    async def _post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", path, content=json.dumps(body, ensure_ascii=True),
                                headers={"Content-Type": "application/json"})

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/search`` with ``body`` as given (``query``, ``k``, filters)."""
        return await self._post_json("/v1/search", body)

    async def document(self, document_id: str) -> dict[str, Any]:
        """``GET /v1/documents/{id}``: one document of the key's project.  An id outside
        the API's pattern is refused here (it becomes part of the URL path)."""
        try:
            check_document_id(document_id)
        except ValueError as exc:
            raise ApiCallFailed(str(exc), 422) from None
        return await self._call("GET", f"/v1/documents/{quote(document_id, safe='')}")

    async def documents(self, status: Optional[str], limit: int, offset: int) -> dict[str, Any]:
        """``GET /v1/documents``: a page of the key's project's documents, newest upload
        first; ``status`` narrows them (QUEUED, …, COMPLETED, FAILED, DELETED)."""
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status is not None:
            params["status"] = status
        return await self._call("GET", "/v1/documents", params=params)

    async def upload_reference(self, bucket: str, key: str, fields: dict[str, str]) -> dict[str, Any]:
        """``POST /v1/documents`` as JSON: the object ``s3://bucket/key`` (which the API
        allows only in its own ``incoming/{project}/`` or the reference buckets), plus
        ``fields`` (``category``, ``document_id``, ``filename``)."""
        return await self._post_json("/v1/documents", {"source": {"bucket": bucket, "key": key}, **fields})

    async def upload_file(self, name: str, reader: Any, fields: dict[str, str]) -> dict[str, Any]:
        """``POST /v1/documents`` as multipart: the bytes of ``reader`` (a file object;
        httpx learns its length by seeking to the end, for the Content-Length) as the
        field ``file`` named ``name``, plus form ``fields`` (``category``, ``document_id``)."""
        return await self._call("POST", "/v1/documents", files={"file": (name, reader)}, data=fields)
