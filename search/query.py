"""Hybrid search over a project's chunks, with reranking.

1. Candidates: embed the query (Triton's ``embedder_online`` model: max batch 32,
   2 ms queue delay, with a short deadline; the in-process ONNX embedder — the same
   graph, cosine ≥ 0.999999 — when Triton does not answer), then two Milvus searches
   run side by side (adapters/vector_store.py ``VectorStore.hybrid_search`` /
   ``hybrid_search_sync``): dense ANN (cosine) and BM25 over the chunk text, both
   narrowed by the same filter expression (:class:`SearchFilters`), fused in our
   code by reciprocal rank fusion (score = Σ 1/(60 + rank); ties broken by the two
   scores, ``rrf_fuse``).  So a chunk the dense ranking misses — an exact name, a figure
   like "318,285", a postcode — is still found by its words.  The top
   ``max(4k, 20)`` are kept when they belong to each document's CURRENT version —
   its newest COMPLETED version not deleted, from the ledger — so a superseded,
   failed, deleted or still-running version is never returned (the window doubles,
   up to ``MAX_CANDIDATES``, until enough remain).  ``mode="dense"`` (benchmarks)
   and collections made before the BM25 field existed use dense ANN only; the
   result says so (``rankers``, ``fallback_reason``).
2. With ``RAGSTREAM_SECOND_STAGE=late-interaction``, the first
   ``late_interaction_depth`` fused candidates are reordered by MaxSim over the
   embedder's token vectors (search/late_interaction.py; ``rankers`` then names
   ``"late-interaction"``).
3. The cross-encoder reranker on Triton orders the candidates when its weights are
   configured and it answers within its deadline (adapters/reranker.py, behind a
   process-wide circuit breaker); otherwise the fused order stands, and the result
   says it was not reranked and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.vector_store import HybridHits, NoMetadataField, VectorStore
from streams.settings import Settings

@dataclass(frozen=True)
class SearchFilters:
    """Optional narrowing of a project's search (all given filters must hold).

    ``category``: the document's category (profile name); ``document_id``: one
    document; ``page_from``/``page_to``: inclusive 1-based page range of a chunk's
    first page (chunks of formats without pages have page 0 and are excluded by any
    page filter); ``metadata``: a filter on the documents' user metadata
    (search/metadata_filter.py, e.g. ``{"team": "ops", "year": {"$gte": 2020}}``).
    """

    category: str | None = None
    document_id: str | None = None
    page_from: int | None = None
    page_to: int | None = None
    metadata: dict | None = None

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
        if self.metadata:
            from search.metadata_filter import metadata_expr

            parts.append(metadata_expr(self.metadata))
        return " and ".join(parts)


@dataclass
class SearchResult:
    """``hits`` best first (Milvus fields + ``score``: cross-encoder logit when
    ``reranked``, else the RRF score of dense + BM25, or the cosine when dense only;
    ``dense_score``: cosine); ``fallback_reason``: why not reranked and/or why dense
    only ("; "-joined), None when neither; ``rankers``: which rankings ran, in order
    (``["dense", "bm25", "rrf"]``, ``["dense"]``, either + ``"late-interaction"`` and/or
    ``"cross-encoder"``)."""

    hits: list[dict[str, Any]]
    reranked: bool
    fallback_reason: str | None = None
    candidates: int = 0
    extra: dict = field(default_factory=dict)
    rankers: list[str] = field(default_factory=list)


def reranker_weights_present(settings: Settings) -> bool:
    """True when the cross-encoder's weights exist (triton/export_reranker.py)."""
    root = Path(settings.reranker_dir) if settings.reranker_dir else \
        Path(__file__).resolve().parents[1] / "triton" / "reranker" / "1"
    return (root / "model.onnx").is_file()


MAX_CANDIDATES = 1024


@dataclass
class SearchClients:
    """Open clients a caller that searches repeatedly passes to :func:`search` (the
    API process, ``eval retrieval``): opening a Milvus client and a PostgreSQL pool
    per query costs ~170 ms (measured 2026-11-30 on the corpus project: 217 ms per
    query with new clients against 50 ms for the same hybrid search on a warm one).
    ``metadata``: an entered ``adapters.metadata.Metadata``; ``vectors``: a
    ``VectorStore``.  The caller closes them."""

    metadata: Any
    vectors: VectorStore


async def current_candidates(vector: list[float], query: str, *, project: str, want: int,
                             settings: Settings, filters: SearchFilters | None = None,
                             mode: str = "hybrid", clients: SearchClients | None = None,
                             alias: str = "prod") -> HybridHits:
    """Up to ``want`` candidates (best first; ``mode`` "hybrid": dense + BM25 fused
    by RRF, "dense": dense ANN only) that belong to their document's current version
    (adapters/version_ledger.py ``current_versions``) and pass ``filters``, from the
    collection behind the project's ``alias`` ("prod", or "test": the one
    ``ragstream reindex --alias test`` built; LookupError when it does not exist).
    Uses ``clients`` when given, else opens (and closes) its own."""
    from adapters.metadata import Metadata

    if mode not in ("hybrid", "dense"):
        raise ValueError(f"mode must be 'hybrid' or 'dense', not {mode!r}")
    if clients is not None:
        return await _candidates(clients, vector, query, project=project, want=want,
                                 filters=filters, mode=mode, alias=alias)
    store = VectorStore(settings.milvus_uri)
    try:
        async with Metadata(settings.pg_dsn) as metadata:
            return await _candidates(SearchClients(metadata, store), vector, query, project=project,
                                     want=want, filters=filters, mode=mode, alias=alias)
    finally:
        store.close()


async def _candidates(clients: SearchClients, vector: list[float], query: str, *, project: str,
                      want: int, filters: SearchFilters | None, mode: str, alias: str = "prod") -> HybridHits:
    from search.metadata_filter import matches

    store, metadata = clients.vectors, clients.metadata
    expr = filters.milvus_expr() if filters else ""
    if filters is not None and filters.metadata and not await store.has_metadata_field(project, alias):
        raise NoMetadataField(f"project {project}'s collection was made before user metadata existed: "
                              f"`ragstream reindex -p {project}` builds one that has it")
    limit = want
    while True:
        if mode == "hybrid":
            found = await store.hybrid_search(project, vector, query, k=limit, filter=expr, alias=alias)
        else:
            hits = await store.search(project, vector, k=limit, filter=expr, alias=alias)
            found = HybridHits([{**h, "dense_score": h["score"]} for h in hits], ["dense"])
        hits = found.hits
        current = await metadata.ledger.current_versions(
            sorted({h["document_id"] for h in hits}))
        kept = [h for h in hits if current.get(h["document_id"]) == h["version"]
                and (not filters or not filters.metadata or matches(h.get("metadata"), filters.metadata))]
        if len(kept) >= want or len(hits) < limit or limit >= MAX_CANDIDATES:
            return HybridHits(kept[:want], found.rankers, found.fallback_reason)
        limit = min(limit * 2, MAX_CANDIDATES)


QUERY_DEADLINE_S = 2.0  # online embedding of one query through Triton


async def embed_query(query: str, settings: Settings) -> tuple[Any, str]:
    """The query's vector (float32 (384,), L2-normalised) and which embedder made it:
    ``"triton"`` or ``"onnx"`` (configured, or the fallback when Triton failed)."""
    from adapters.embedder import shared_onnx_embedder
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
    return (await shared_onnx_embedder(settings).embed([query]))[0], "onnx"


async def search(query: str, *, project: str, k: int, settings: Settings,
                 rerank_results: bool = True, filters: SearchFilters | None = None,
                 mode: str = "hybrid", clients: SearchClients | None = None,
                 alias: str = "prod") -> SearchResult:
    """Top-``k`` chunks for ``query`` in ``project`` narrowed by ``filters``; ``mode``
    "hybrid" (default: dense + BM25) or "dense" (see the module docstring); open
    ``clients`` to reuse (else each call opens its own); ``alias`` "prod" (default)
    or "test" (:func:`current_candidates`).  Raises ValueError for another mode or
    alias, LookupError for a test alias not made yet, ``schemas.user_metadata.InvalidMetadata``
    for a bad metadata filter and ``adapters.vector_store.NoMetadataField`` (a
    LookupError) for a metadata filter on a collection made before the field."""
    from adapters.reranker import TritonReranker, rerank

    vector, query_embedder = await embed_query(query, settings)
    found = await current_candidates(vector.tolist(), query, project=project, want=max(4 * k, 20),
                                     settings=settings, filters=filters, mode=mode, clients=clients,
                                     alias=alias)
    candidates = found.hits
    if not candidates:
        return SearchResult([], False, _reasons("no candidates", found.fallback_reason),
                            rankers=found.rankers)
    late_ran, late_reason = False, None
    if settings.second_stage == "late-interaction":
        candidates, late_reason = await _late_interaction(query, candidates, settings)
        late_ran = late_reason is None
    by_id = {c["chunk_id"]: c for c in candidates}
    reranker = None
    if rerank_results and reranker_weights_present(settings):
        reranker = TritonReranker.from_settings(settings)
    try:
        # one ranking (already fused): without the cross-encoder its order stands
        result = await rerank(query, [list(by_id)], {i: c["text"] for i, c in by_id.items()}, reranker,
                              deadline_s=settings.reranker_timeout_s, top_k=k)
    finally:
        if reranker is not None and hasattr(reranker, "close"):
            await reranker.close()
    if result.reranked:
        hits = [{**by_id[cid], "score": float(score)} for cid, score in zip(result.ids, result.scores)]
    else:
        hits = [by_id[cid] for cid in result.ids]  # keep Milvus's fused (or cosine) score
    rankers = found.rankers + (["late-interaction"] if late_ran else []) + \
        (["cross-encoder"] if result.reranked else [])
    return SearchResult(hits, result.reranked, _reasons(result.fallback_reason, found.fallback_reason, late_reason),
                        len(candidates), {"query_embedder": query_embedder, "latency_s": result.latency_s,
                                          "mode": mode}, rankers)


async def _late_interaction(query: str, candidates: list[dict[str, Any]],
                            settings: Settings) -> tuple[list[dict[str, Any]], str | None]:
    """(``candidates`` with the first ``late_interaction_depth`` reordered by MaxSim
    (search/late_interaction.py), None) — or the candidates unchanged and why, when the
    embedder's graph has no token output or the in-process model fails."""
    import asyncio

    from search.late_interaction import reorder, shared_encoder

    encoder = shared_encoder(settings.embedder_onnx_path, settings.embedder_max_tokens)
    try:
        return await asyncio.to_thread(reorder, query, candidates, encoder,
                                       settings.late_interaction_depth), None
    except Exception as exc:  # noqa: BLE001 — the fused order stands, the result says why
        return candidates, f"late interaction off: {exc}"


def _reasons(*reasons: str | None) -> str | None:
    """The given reasons joined by "; ", or None when there are none."""
    return "; ".join(r for r in reasons if r) or None
