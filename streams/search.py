"""Semantic search over a project's chunks: embed the query, search Milvus."""
from __future__ import annotations

from typing import Any

from adapters.vector_store import VectorStore
from streams.settings import Settings


async def search(query: str, *, project: str, k: int, settings: Settings,
                 embedder=None) -> list[dict[str, Any]]:
    """Top-``k`` chunks for ``query``: dicts with text, document_id, version,
    page_number, filename, element_types and ``score`` (cosine similarity, -1..1)."""
    from adapters.embedder import create_embedder

    own = embedder is None
    embedder = embedder or create_embedder(settings)
    try:
        vector = (await embedder.embed([query]))[0]
    finally:
        if own:
            await embedder.close()
    store = VectorStore(settings.milvus_uri)
    try:
        return await store.search(project, vector.tolist(), k=k)
    finally:
        store.close()
