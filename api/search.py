"""``POST /v1/search``: the key's project searched over HTTP.

The route is a thin shell over :func:`search.query.search` (dense + BM25
candidates of each document's current version fused by reciprocal rank fusion, then
the cross-encoder when configured); the body's filters become :class:`search.query.SearchFilters`.
Auth as every ``/v1`` route: no or bad key → 401; a ``project`` other than the key's
→ 403; a malformed body → 422.
"""
from __future__ import annotations

import time
from typing import Any, Optional

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.auth import get_state, require_project
from api.documents import DOC_ID_RE, NAME_RE
from api.state import ApiState
from adapters.vector_store import NoMetadataField
from search.metadata_filter import metadata_expr

router = APIRouter(prefix="/v1", tags=["search"])
MAX_PAGE = 1_000_000


class SearchRequest(BaseModel):
    """What to search for and how to narrow it (all filters must hold)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4096, description="the question or keywords")
    k: int = Field(10, ge=1, le=100, description="hits to return")
    project: Optional[str] = Field(None, description="defaults to the key's project; another → 403")
    category: Optional[str] = Field(None, pattern=f"^{NAME_RE.pattern}$",
                                    description="only documents of this category")
    document_id: Optional[str] = Field(None, pattern=f"^{DOC_ID_RE.pattern}$", description="only this document")
    page_from: Optional[int] = Field(None, ge=1, le=MAX_PAGE, description="first page (1-based, inclusive); "
                                     "chunks without pages (page 0) are excluded by any page filter")
    page_to: Optional[int] = Field(None, ge=1, le=MAX_PAGE, description="last page (inclusive)")
    metadata_filter: Optional[dict[str, Any]] = Field(
        None, description='user metadata filter: {"key": value} (equality) or {"key": {"$gte": 2020}}; '
                          "operators $eq $ne $gt $gte $lt $lte $in $nin $contains $contains_any $exists; "
                          "every key must hold (search/metadata_filter.py)")

    @model_validator(mode="after")
    def _pages(self) -> "SearchRequest":
        if not self.query.strip():
            raise ValueError("query is blank")
        if self.page_from is not None and self.page_to is not None and self.page_from > self.page_to:
            raise ValueError("page_from is after page_to")
        if self.metadata_filter is not None:
            metadata_expr(self.metadata_filter)  # InvalidMetadata is a ValueError: 422
        return self


class SearchHit(BaseModel):
    """One chunk, best first."""

    document_id: str
    version: int
    filename: str = ""
    page_number: Optional[int] = Field(None, description="first page of the chunk (0: format without pages)")
    element_types: list[str] = []
    text: str
    score: float = Field(description="cross-encoder logit when reranked, else the RRF score")
    dense_score: Optional[float] = Field(None, description="cosine similarity of the dense retrieval")
    metadata: Optional[dict[str, Any]] = Field(None, description="the document version's user metadata")


class SearchResponse(BaseModel):
    """The hits and how they were ranked."""

    query: str
    project: str
    k: int
    rankers: list[str] = Field(description="the rankings that ran, in order")
    reranked: bool
    fallback_reason: Optional[str] = None
    hits: list[SearchHit]
    latency_ms: float = Field(description="wall time of the search in the API (ms)")


def _element_types(value: object) -> list[str]:
    """A chunk's element types as a list (stored as a list or a comma-separated string)."""
    if isinstance(value, str):
        return [t for t in (p.strip() for p in value.split(",")) if t]
    if isinstance(value, (list, tuple)):
        return [str(t) for t in value]
    return []


@router.post("/search", response_model=SearchResponse,
             responses={401: {"description": "no or invalid API key"},
                        403: {"description": "the project is not the key's"},
                        409: {"description": "a metadata filter on a collection made before "
                                             "metadata existed (ragstream reindex makes a new one)"},
                        422: {"description": "malformed body"}})
async def search_route(body: SearchRequest, key_project: str = Depends(require_project),
                       state: ApiState = Depends(get_state)) -> SearchResponse:
    """Top-``k`` chunks of the key's project for ``query`` (current versions only)."""
    from search.query import SearchClients, SearchFilters, search

    if body.project is not None and body.project != key_project:
        raise HTTPException(403, f"this API key is not valid for project {body.project!r}")
    from streams.document_ids import local_id, scoped_id

    own = scoped_id(key_project, body.document_id) if body.document_id is not None else None
    filters = SearchFilters(category=body.category, document_id=own,
                            page_from=body.page_from, page_to=body.page_to, metadata=body.metadata_filter)
    start = time.perf_counter()
    try:
        result = await search(body.query, project=key_project, k=body.k, settings=state.settings,
                              filters=filters, clients=SearchClients(state.metadata, state.vectors))
    except NoMetadataField as exc:
        raise HTTPException(409, str(exc)) from exc
    ms = (time.perf_counter() - start) * 1000
    hits = [SearchHit(document_id=local_id(key_project, h["document_id"]), version=int(h["version"]),
                      filename=h.get("filename") or "", page_number=h.get("page_number"),
                      element_types=_element_types(h.get("element_types")), text=h.get("text") or "",
                      score=float(h["score"]),
                      dense_score=float(h["dense_score"]) if h.get("dense_score") is not None else None,
                      metadata=h.get("metadata"))
            for h in result.hits]
    return SearchResponse(query=body.query, project=key_project, k=body.k, rankers=list(result.rankers),
                          reranked=result.reranked, fallback_reason=result.fallback_reason, hits=hits,
                          latency_ms=round(ms, 1))
