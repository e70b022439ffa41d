"""The MCP tools: search, document status, the project's documents, upload by S3
reference or by local path — each one or two calls of ragstream's HTTP API with the
server's one project key (:class:`mcp_server.api_client.RagstreamApi`).

Every tool answers the API's JSON as structured content (and as text).  A failure the
caller can act on — the API's 4xx with its message, an API that does not answer, a
refused path, a malformed reference — is a tool error (``is_error``) whose text says
what was wrong; arguments of the wrong type are refused by the SDK the same way.  The
API is the authority on values (ids, categories, ``k``, page ranges, filters): they
pass through, and its 422 comes back as the tool error.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcp_server.api_client import ApiCallFailed, RagstreamApi
from mcp_server.path_guard import PathRefused, open_under_root
from streams.document_ids import default_document_id

INSTRUCTIONS = (
    "ragstream: documents of one project (the one the server's API key belongs to), "
    "ingested into hybrid (dense + BM25) search. Use `search` to find passages, "
    "`list_documents` / `document_status` to see what is there and whether it is "
    "searchable yet (status COMPLETED), and `upload_url` / `upload_file` to add a "
    "document (then poll `document_status` until COMPLETED or FAILED).")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
UPLOAD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                         open_world_hint=False)

Category = Annotated[str, Field(description="the document's category ([A-Za-z0-9_-]{1,64}; its "
                                            "profile decides how it is parsed)")]
DocumentId = Annotated[Optional[str], Field(
    description="the document's id in the project ([A-Za-z0-9][A-Za-z0-9._-]{0,127}); an existing "
                "id gets a new version; default: derived from the file name")]


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` → ``(bucket, key)``, the key as written (no decoding or
    normalising: the API checks its segments).  Raises ValueError for anything else."""
    if not isinstance(url, str) or not url.startswith("s3://"):
        raise ValueError("url must be an S3 reference s3://bucket/key")
    bucket, _, key = url[len("s3://"):].partition("/")
    if not bucket or not key:
        raise ValueError("url must be an S3 reference s3://bucket/key (both a bucket and a key)")
    return bucket, key


async def _answer(call: Any) -> dict[str, Any]:
    """Await one API call; its refusal becomes a ToolError with the API's message."""
    try:
        return await call
    except ApiCallFailed as exc:
        raise ToolError(str(exc)) from None


def build_server(api: RagstreamApi, root: Optional[Path], max_upload_bytes: int) -> MCPServer:
    """The MCP server with its five tools, over ``api`` (entered by the caller and
    closed after the server stops).  ``root``: the upload root from
    :func:`mcp_server.path_guard.upload_root` (None: ``upload_file`` refuses every
    path); ``max_upload_bytes``: the largest file ``upload_file`` sends (bytes)."""
    server = MCPServer("ragstream", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(annotations=READ_ONLY)
    async def search(
            query: Annotated[str, Field(description="the question or keywords (1 to 4096 characters)")],
            k: Annotated[int, Field(description="hits to return, 1 to 100")] = 10,
            category: Annotated[Optional[str], Field(description="only documents of this category")] = None,
            document_id: Annotated[Optional[str], Field(description="only this document")] = None,
            page_from: Annotated[Optional[int], Field(description="first page, 1-based, inclusive; "
                                                      "chunks without pages are excluded by any page "
                                                      "filter")] = None,
            page_to: Annotated[Optional[int], Field(description="last page, inclusive")] = None,
            metadata_filter: Annotated[Optional[dict[str, Any]], Field(
                description="a filter on the documents' metadata, passed to the API unchanged "
                            "(POST /v1/search metadata_filter)")] = None,
    ) -> dict[str, Any]:
        """Hybrid search (dense + BM25, fused; reranked when a cross-encoder is
        configured) over the current version of every COMPLETED document of the
        project. Answers {query, project, k, rankers, reranked, fallback_reason,
        latency_ms, hits: [{document_id, version, filename, page_number, element_types,
        text, score, dense_score}]}, best first."""
        body: dict[str, Any] = {"query": query, "k": k}
        for name, value in (("category", category), ("document_id", document_id),
                            ("page_from", page_from), ("page_to", page_to),
                            ("metadata_filter", metadata_filter)):
            if value is not None:  # only what was given: the API refuses fields it lacks
                body[name] = value
        return await _answer(api.search(body))

    @server.tool(annotations=READ_ONLY)
    async def document_status(
            document_id: Annotated[str, Field(description="the document's id in the project")],
    ) -> dict[str, Any]:
        """One document of the project: status (QUEUED … COMPLETED, FAILED, DELETED),
        version, stage, chunks_total/chunks_done, pages, error and error_code when
        FAILED, sha256, size (bytes), timestamps and callbacks. Another project's id
        answers 'document not found'."""
        return await _answer(api.document(document_id))

    @server.tool(annotations=READ_ONLY)
    async def list_documents(
            status: Annotated[Optional[str], Field(
                description="only documents in this status: QUEUED, NORMALIZING, PARTITIONING, CHUNKING, "
                            "ENHANCING, EMBEDDING, INDEXING, COMPLETED, FAILED or DELETED")] = None,
            limit: Annotated[int, Field(description="documents per page, 1 to 500")] = 50,
            offset: Annotated[int, Field(description="documents to skip (paging)")] = 0,
    ) -> dict[str, Any]:
        """The project's documents, newest upload first: {items: [document as
        document_status answers, without callbacks], limit, offset, next_offset (null
        on the last page), total}."""
        return await _answer(api.documents(status, limit, offset))

    @server.tool(annotations=UPLOAD)
    async def upload_url(
            url: Annotated[str, Field(description="s3://bucket/key of an object the API may read: "
                                                  "in its bucket under incoming/<project>/, or in a "
                                                  "bucket of RAGSTREAM_API_REFERENCE_BUCKETS")],
            category: Category = "default",
            document_id: DocumentId = None,
            filename: Annotated[Optional[str], Field(description="the file name to record; default: "
                                                                 "the key's last segment")] = None,
    ) -> dict[str, Any]:
        """Ingest an object already in S3 (the API copies it server-side). Answers
        {document_id, version, status, queued (false when the bytes equal the latest
        version's), sha256, size, status_url, filename}; poll document_status until
        COMPLETED or FAILED."""
        try:
            bucket, key = parse_s3_url(url)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        fields = {"category": category}
        fields.update({k: v for k, v in (("document_id", document_id), ("filename", filename)) if v is not None})
        return await _answer(api.upload_reference(bucket, key, fields))

    @server.tool(annotations=UPLOAD)
    async def upload_file(
            path: Annotated[str, Field(description="a file under the server's upload root (--root): "
                                                   "absolute, or relative to the root")],
            category: Category = "default",
            document_id: DocumentId = None,
    ) -> dict[str, Any]:
        """Ingest a local file from under the upload root the operator configured
        (--root; without one this tool refuses every path). Its document id defaults
        to the one `ragstream ingest ROOT` gives the same file (from its path under
        the root). Symlinks and '..' are
        resolved and anything outside the root is refused, as are non-regular files
        and files over the upload limit. Answers as upload_url."""
        try:
            opened = open_under_root(root, path, max_upload_bytes)
        except PathRefused as exc:
            raise ToolError(str(exc)) from None
        # the document is named by the path under the root, as `ingest ROOT` and `sync ROOT`
        # name it (a/report.txt and report.txt are two documents), unless an id is given
        fields = {"category": category, "document_id": document_id or default_document_id(opened.relative)}
        with opened.reader:
            try:
                return await _answer(api.upload_file(opened.name, opened.reader, fields))
            except PathRefused as exc:  # the file shrank while it was sent
                raise ToolError(str(exc)) from None

    return server
