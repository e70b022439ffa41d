"""Semantic search over a project's chunks, with reranking.

1. Dense retrieval: embed the query (Triton's ``embedder_online`` model: max batch
   32, 2 ms queue delay, with a short deadline; the in-process ONNX embedder — the
   same graph, cosine ≥ 0.999999 — when Triton does not answer), take the top
   ``max(4k, 20)`` chunks from Milvus, keeping only chunks of each document's
   CURRENT version — its newest COMPLETED version not deleted, from the ledger —
   so a superseded, failed, deleted or still-running version is never returned
   (the candidate window doubles, up to ``MAX_CANDIDATES``, until k remain).
2. A lexical ranking of those candidates (query-term overlap, IDF-weighted within
   the candidate set).
3. The cross-encoder reranker on Triton orders the candidates when its weights are
   configured and it answers within its deadline; otherwise reciprocal rank fusion
   (score = Σ 1/(60 + rank)) of the dense and lexical rankings does, and the result
   says it was not reranked and why.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.vector_store import VectorStore
from streams.settings import Settings

TOKEN = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class SearchFilters:
    """Optional narrowing of a project's search (all given filters must hold).

    ``category``: the document's category (profile name); ``document_id``: one
    document; ``page_from``/``page_to``: inclusive 1-based page range of a chunk's
    first page (chunks of formats without pages have page 0 and are excluded by any
    page filter).
    """

    category: str | None = None
    document_id: str | None = None
    page_from: int | None = None
    page_to: int | None = None

    def milvus_expr(self) -> str:
        """The filters as a Milvus boolean expression ("" when none is set)."""
        from adapters.vector_store import quote_literal

        parts = []
        if self.category is not None:
            parts.append(f"category == {quote_literal(self.category)}")
        if self.document_id is not None:
            parts.append(f"document_id == {quote_literal(self.document_id)}")
        if self.page_from is not None:
            parts.append(f"page_number >= {int(self.page_from)}")
        if self.page_to is not None:
            parts.append(f"page_number <= {int(self.page_to)}")
        return " and ".join(parts)


@dataclass
class SearchResult:
    """``hits`` best first (Milvus fields + ``score``: cross-encoder logit when
    ``reranked``, else RRF score; ``dense_score``: cosine); ``fallback_reason`` when
    not reranked; ``rankers``: which rankings ran, in order (e.g. ``["dense",
    "lexical", "rrf"]`` or ``[..., "cross-encoder"]``)."""

    hits: list[dict[str, Any]]
    reranked: bool
    fallback_reason: str | None = None
    candidates: int = 0
    extra: dict = field(default_factory=dict)
    rankers: list[str] = field(default_factory=list)


def lexical_ranking(query: str, candidates: list[dict[str, Any]]) -> list[str]:
    """Candidate chunk ids by IDF-weighted query-term overlap (ties: dense order)."""
    terms = {t.lower() for t in TOKEN.findall(query)}
    docs = [{t.lower() for t in TOKEN.findall(c["text"])} for c in candidates]
    n = len(docs)
    idf = {t: math.log(1 + n / (1 + sum(t in d for d in docs))) for t in terms}
    scored = [(sum(idf[t] for t in terms if t in d), -i, c["chunk_id"])
              for i, (c, d) in enumerate(zip(candidates, docs))]
    return [cid for *_, cid in sorted(scored, reverse=True)]


def reranker_weights_present(settings: Settings) -> bool:
    """True when the cross-encoder's weights exist (triton/export_reranker.py)."""
    root = Path(settings.reranker_dir) if settings.reranker_dir else \
        Path(__file__).resolve().parents[1] / "triton" / "reranker" / "1"
    return (root / "model.onnx").is_file()


MAX_CANDIDATES = 1024


async def current_candidates(vector: list[float], *, project: str, want: int,
                             settings: Settings, filters: SearchFilters | None = None
                             ) -> list[dict[str, Any]]:
    """Up to ``want`` dense candidates (best first) that belong to their document's
    current version (adapters/version_ledger.py ``current_versions``) and pass
    ``filters``."""
    from adapters.metadata import Metadata

    store = VectorStore(settings.milvus_uri)
    limit = want
    try:
        async with Metadata(settings.pg_dsn) as metadata:
            while True:
                hits = await store.search(project, vector, k=limit,
                                          filter=filters.milvus_expr() if filters else "")
                current = await metadata.ledger.current_versions(
                    sorted({h["document_id"] for h in hits}))
                kept = [h for h in hits if current.get(h["document_id"]) == h["version"]]
                if len(kept) >= want or len(hits) < limit or limit >= MAX_CANDIDATES:
                    return kept[:want]
                limit = min(limit * 2, MAX_CANDIDATES)
    finally:
        store.close()


QUERY_DEADLINE_S = 2.0  # online embedding of one query through Triton


async def embed_query(query: str, settings: Settings) -> tuple[Any, str]:
    """The query's vector (float32 (384,), L2-normalised) and which embedder made it:
    ``"triton"`` or ``"onnx"`` (configured, or the fallback when Triton failed)."""
    from adapters.embedder import OnnxEmbedder
    from adapters.triton_embedder import TritonEmbedder

    if settings.embedder == "triton":
        online = TritonEmbedder(f"{settings.triton_host}:{settings.triton_grpc_port}",
                                "embedder_online", timeout_s=QUERY_DEADLINE_S, retry_s=0.0)
        try:
            return (await online.embed([query]))[0], "triton"
        except Exception:  # noqa: BLE001 — any Triton failure: embed in process instead
            pass
        finally:
            await online.close()
    local = OnnxEmbedder(settings.embedder_onnx_path, max_tokens=settings.embedder_max_tokens)
    try:
        return (await local.embed([query]))[0], "onnx"
    finally:
        await local.close()


async def search(query: str, *, project: str, k: int, settings: Settings,
                 rerank_results: bool = True, filters: SearchFilters | None = None) -> SearchResult:
    """Top-``k`` chunks for ``query`` in ``project`` narrowed by ``filters`` (see the
    module docstring)."""
    from adapters.reranker import TritonReranker, rerank

    vector, query_embedder = await embed_query(query, settings)
    candidates = await current_candidates(vector.tolist(), project=project,
                                          want=max(4 * k, 20), settings=settings, filters=filters)
    if not candidates:
        return SearchResult([], False, "no candidates", rankers=["dense"])
    by_id = {c["chunk_id"]: c for c in candidates}
    for c in candidates:
        c["dense_score"] = c["score"]
    rankings = [[c["chunk_id"] for c in candidates], lexical_ranking(query, candidates)]
    reranker = None
    if rerank_results and reranker_weights_present(settings):
        reranker = TritonReranker.from_settings(settings)
    try:
        result = await rerank(query, rankings, {i: c["text"] for i, c in by_id.items()}, reranker,
                              deadline_s=settings.reranker_timeout_s, top_k=k)
    finally:
        if reranker is not None and hasattr(reranker, "close"):
            await reranker.close()
    hits = []
    for cid, score in zip(result.ids, result.scores):
        hits.append({**by_id[cid], "score": float(score)})
    rankers = ["dense", "lexical"] + (["cross-encoder"] if result.reranked else ["rrf"])
    return SearchResult(hits, result.reranked, result.fallback_reason, len(candidates),
                        {"query_embedder": query_embedder, "latency_s": result.latency_s}, rankers)
