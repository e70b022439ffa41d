"""Vectors in Milvus (pymilvus): one collection per project behind an alias.

The alias ``chunks_{project}`` points at the physical collection
``chunks_{project}_v{n}`` so a reindex can build ``v{n+1}`` and swap the alias.
Primary key: the chunk id ``{document_id}:{version}:{index}`` — upserts are
idempotent.  Index: FLAT with inner product (vectors are L2-normalised, so IP is
cosine); FLAT keeps full top-k under selective filters (DESIGN.md).

The synchronous MilvusClient is used (AsyncMilvusClient's create_collection with
index params raises UNIMPLEMENTED on Milvus Lite, DESIGN.md); every call runs in a
thread so it never blocks the event loop.
"""
from __future__ import annotations

import asyncio
import re
from typing import Any, Optional, Sequence

from pymilvus import DataType, MilvusClient

DIM = 384  # all-MiniLM-L6-v2
TEXT_MAX = 65535
OUTPUT_FIELDS = ["chunk_id", "document_id", "version", "chunk_index", "page_number",
                 "element_types", "filename", "project", "category", "text"]


class InvalidProjectName(ValueError):
    """A project name that cannot name a Milvus collection."""


def alias_name(project: str) -> str:
    """``chunks_{project}``; projects are ``[A-Za-z0-9_-]{1,64}`` (``-`` becomes ``_``)."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", project):
        raise InvalidProjectName(f"project name {project!r} must match [A-Za-z0-9_-]{{1,64}}")
    return "chunks_" + project.replace("-", "_")


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class VectorStore:
    """Milvus access for ragstream chunks.  ``uri``: e.g. ``http://127.0.0.1:19530``."""

    def __init__(self, uri: str, timeout_s: float = 30.0):
        self.uri = uri
        self.timeout_s = timeout_s
        self._client: Optional[MilvusClient] = None
        self._ready: set[str] = set()

    @property
    def client(self) -> MilvusClient:
        if self._client is None:
            self._client = MilvusClient(uri=self.uri, timeout=self.timeout_s)
        return self._client

    def close(self) -> None:
        """Close the connection (the next call reconnects)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- collections ------------------------------------------------------------------
    def ensure_collection_sync(self, project: str) -> str:
        """Create ``chunks_{project}_v1`` and its alias when the alias is missing;
        returns the alias.  Idempotent."""
        alias = alias_name(project)
        if alias in self._ready:
            return alias
        client = self.client
        if alias not in set(client.list_aliases().get("aliases", [])) and not client.has_collection(alias):
            physical = f"{alias}_v1"
            if not client.has_collection(physical):
                schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
                schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=512)
                schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
                schema.add_field("document_id", DataType.VARCHAR, max_length=256)
                schema.add_field("version", DataType.INT64)
                schema.add_field("chunk_index", DataType.INT64)
                schema.add_field("page_number", DataType.INT64)
                schema.add_field("element_types", DataType.VARCHAR, max_length=1024)
                schema.add_field("filename", DataType.VARCHAR, max_length=1024)
                schema.add_field("project", DataType.VARCHAR, max_length=64)
                schema.add_field("category", DataType.VARCHAR, max_length=128)
                schema.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX)
                index = client.prepare_index_params()
                index.add_index(field_name="vector", index_type="FLAT", metric_type="IP")
                client.create_collection(physical, schema=schema, index_params=index)
            client.create_alias(physical, alias)
        client.load_collection(alias)
        self._ready.add(alias)
        return alias

    # -- writes -----------------------------------------------------------------------
    def upsert_sync(self, project: str, rows: Sequence[dict[str, Any]]) -> int:
        """Upsert chunk rows (keys: OUTPUT_FIELDS + ``vector``); returns the row count."""
        alias = self.ensure_collection_sync(project)
        for row in rows:
            row["text"] = row["text"][: TEXT_MAX // 4]  # VARCHAR limit is in bytes (UTF-8 ≤ 4)
        self.client.upsert(alias, list(rows))
        return len(rows)

    def delete_versions_below_sync(self, project: str, document_id: str, version: int) -> None:
        """Delete a document's chunks of every version lower than ``version``."""
        alias = self.ensure_collection_sync(project)
        self.client.delete(alias, filter=f"document_id == {_quote(document_id)} and version < {int(version)}")

    def delete_version_sync(self, project: str, document_id: str, version: int) -> None:
        """Delete the chunks of one version of a document."""
        alias = self.ensure_collection_sync(project)
        self.client.delete(alias, filter=f"document_id == {_quote(document_id)} and version == {int(version)}")

    def delete_document_sync(self, project: str, document_id: str) -> None:
        """Delete every chunk of a document."""
        alias = self.ensure_collection_sync(project)
        self.client.delete(alias, filter=f"document_id == {_quote(document_id)}")

    # -- reads ------------------------------------------------------------------------
    def count_sync(self, project: str, document_id: str, version: Optional[int] = None) -> int:
        """Number of chunks stored for a document (optionally one version)."""
        alias = self.ensure_collection_sync(project)
        flt = f"document_id == {_quote(document_id)}"
        if version is not None:
            flt += f" and version == {int(version)}"
        res = self.client.query(alias, filter=flt, output_fields=["count(*)"], consistency_level="Strong")
        return int(res[0]["count(*)"]) if res else 0

    def chunk_ids_sync(self, project: str, document_id: str) -> list[str]:
        """Every primary key stored for a document (for duplicate checks)."""
        alias = self.ensure_collection_sync(project)
        res = self.client.query(alias, filter=f"document_id == {_quote(document_id)}",
                                output_fields=["chunk_id"], limit=16384)
        return [r["chunk_id"] for r in res]

    def search_sync(self, project: str, vector: Sequence[float], k: int = 5,
                    filter: str = "") -> list[dict[str, Any]]:
        """Top-``k`` chunks by inner product (= cosine); each hit: fields + ``score``."""
        alias = self.ensure_collection_sync(project)
        res = self.client.search(alias, data=[list(vector)], limit=k, filter=filter,
                                 output_fields=OUTPUT_FIELDS, anns_field="vector")
        hits = []
        for hit in res[0] if res else []:
            entity = dict(hit.get("entity", {}))
            entity["score"] = float(hit.get("distance", 0.0))
            hits.append(entity)
        return hits

    # -- async wrappers (run in a thread) -------------------------------------------------
    async def upsert(self, project: str, rows: Sequence[dict[str, Any]]) -> int:
        return await asyncio.to_thread(self.upsert_sync, project, rows)

    async def delete_versions_below(self, project: str, document_id: str, version: int) -> None:
        await asyncio.to_thread(self.delete_versions_below_sync, project, document_id, version)

    async def delete_version(self, project: str, document_id: str, version: int) -> None:
        await asyncio.to_thread(self.delete_version_sync, project, document_id, version)

    async def delete_document(self, project: str, document_id: str) -> None:
        await asyncio.to_thread(self.delete_document_sync, project, document_id)

    async def count(self, project: str, document_id: str, version: Optional[int] = None) -> int:
        return await asyncio.to_thread(self.count_sync, project, document_id, version)

    async def search(self, project: str, vector: Sequence[float], k: int = 5,
                     filter: str = "") -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.search_sync, project, vector, k, filter)
