"""``/v1/documents``: upload (multipart or S3 reference), read, list, delete.

The API is a producer of upload events and a reader of the status projection,
nothing more: uploads go through :func:`streams.ingest.queue_version` (the same
tail as ``ragstream ingest``), deletes through :func:`streams.ingest.delete_document`
(the same as ``ragstream delete`` and ``ragstream sync``).

Size: the /v1/documents routes with their request/response models and the S3-reference
upload path; they share the validation and the error shapes the OpenAPI schema
documents.
"""
from __future__ import annotations

import mimetypes
import re
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any, Optional

import orjson
from botocore.exceptions import ClientError
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from prometheus_client import Counter
from pydantic import BaseModel, Field, ValidationError, field_validator

from adapters.callbacks import CallbackRefused, check_url_syntax
from adapters.object_keys import processed_key
from adapters.vector_store import InvalidProjectName, alias_name
from schemas import DocumentStatus, status_event
from schemas.user_metadata import InvalidMetadata, check_metadata, parse_metadata
from api.auth import get_state, require_project
from api.listing_cursor import MAX_CURSOR_CHARS, BadCursor, decode_cursor, encode_cursor
from api.state import ApiState
from stages.filenames import original_name_metadata, safe_filename
from api.uploads import (MULTIPART_OVERHEAD, BadUpload, StagedFile, UploadTooLarge, hash_object,
                         read_capped, receive_multipart)
from streams.document_ids import DOC_ID_RE, InvalidDocumentId, default_document_id, local_id, scoped_id
from streams.ingest import DocumentNotFound, queue_version
from streams.ingest import delete_document as delete_in_project

router = APIRouter(prefix="/v1", tags=["documents"])

UPLOADS_TOTAL = Counter("ragstream_api_uploads_total", "Uploads by outcome", ["outcome"])
UPLOAD_BYTES = Counter("ragstream_api_upload_bytes_total", "Bytes received in accepted uploads")

NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
REFERENCE_BODY_MAX = 64 * 1024  # bytes of a JSON reference upload (a few hundred in practice)


class UploadAccepted(BaseModel):
    """202 answer to an upload."""

    document_id: str
    version: int
    status: str = Field(description="the document's status now (QUEUED for a new version)")
    queued: bool = Field(description="false when the bytes equal the latest version's")
    reason: str = ""
    sha256: str
    size: int = Field(description="bytes")
    status_url: str
    filename: str = Field("", description="the stored (sanitised) file name")
    original_filename: Optional[str] = Field(
        None, description="the name the client sent, when sanitising changed it (also kept as "
                          "the raw object's S3 metadata original-filename, percent-encoded)")


class CallbackInfo(BaseModel):
    """One completion callback and what happened to it."""

    idempotency_key: str
    version: int
    status: str
    state: str = Field(description="pending, delivered, refused or failed")
    attempts: int
    last_code: Optional[int] = None
    reason: Optional[str] = None
    delivered_at: Optional[datetime] = None


class DocumentOut(BaseModel):
    """A document as the status projection (PostgreSQL) knows it."""

    document_id: str
    project: str
    category: str = ""
    filename: str = ""
    version: int
    status: str
    stage: str
    chunks_total: int = 0
    chunks_done: int = 0
    pages: int = 0
    error: Optional[str] = Field(None, description="why it FAILED: one sentence for people")
    error_code: Optional[str] = Field(
        None, description="stable failure code of a FAILED version (corrupt, encrypted, timeout, "
                          "…; the README's table)")
    sha256: str = ""
    size: int = 0
    output: Optional[dict[str, str]] = Field(None, description="processed chunks (COMPLETED only)")
    callbacks: list[CallbackInfo] = []
    metadata: Optional[dict[str, Any]] = Field(None, description="the user metadata of this version")
    partial: bool = Field(False, description="COMPLETED without some parts, listed in failed_parts")
    failed_parts: list[dict[str, str]] = Field(
        [], description='[{"part": "pages 33-64", "code": "too_large", "reason": "..."}]: parts that '
                        "failed for good or were skipped (attachments); the rest is searchable")
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    status_url: str


class DocumentPage(BaseModel):
    """One page of a listing; ``next_offset`` is null on the last page (and when
    paging by cursor); ``next_cursor`` is null when this page is not full. ``total``
    counts the project's documents (of ``status``) now, not at the first page."""

    items: list[DocumentOut]
    limit: int
    offset: int
    next_offset: Optional[int] = None
    next_cursor: Optional[str] = None
    total: int


class DeleteAccepted(BaseModel):
    """202 answer to a delete."""

    document_id: str
    version: int
    queued: bool = Field(True, description="false when the document is DELETED already: nothing sent")
    status_url: str


class S3Source(BaseModel):
    """An object already in S3: in ``settings.api_reference_buckets``, or in the
    ragstream bucket under ``incoming/{project}/``."""

    bucket: str = Field(min_length=3, max_length=63)
    key: str = Field(min_length=1, max_length=1024)

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        # S3 keys are opaque, but SeaweedFS (and any filer or proxy) may normalise
        # them as paths: ``incoming/p/../q/x`` would pass the prefix check and read q's
        if any(seg in ("", ".", "..") for seg in v.split("/")):
            raise ValueError("source.key must not have empty, '.' or '..' segments "
                             "(no leading, trailing or doubled '/')")
        return v


class ReferenceUpload(BaseModel):
    """JSON upload: a reference to an object instead of the bytes."""

    project: Optional[str] = Field(None, description="defaults to the API key's project")
    category: str = "default"
    source: S3Source
    filename: Optional[str] = Field(None, max_length=255, description="defaults to the key's basename")
    document_id: Optional[str] = None
    callback_url: Optional[str] = None
    metadata: Optional[dict[str, Any]] = Field(
        None, description="user metadata (schemas/user_metadata.py); omitted: the latest version's")

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        return None if v is None else check_metadata(v)

    @field_validator("category")
    @classmethod
    def _category(cls, v: str) -> str:
        if not NAME_RE.fullmatch(v):
            raise ValueError("category must match [A-Za-z0-9_-]{1,64}")
        return v


def _inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema with its ``$defs`` inlined (openapi_extra cannot add
    component schemas)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return walk(defs[ref.rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


UPLOAD_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary", "description": "the document"},
                    "project": {"type": "string", "description": "defaults to the key's project"},
                    "category": {"type": "string", "default": "default"},
                    "document_id": {"type": "string", "description": "new version when it exists"},
                    "callback_url": {"type": "string", "format": "uri"},
                    "metadata": {"type": "string", "description": "user metadata, a JSON object "
                                 "(strings, numbers, booleans, ISO dates, string lists); omitted: "
                                 "the latest version's"},
                }}},
            "application/json": {"schema": _inline_schema(ReferenceUpload)},
        },
    },
    "responses": {"413": {"description": "larger than the upload limit; nothing stored"},
                  "415": {"description": "neither multipart/form-data nor application/json"}},
}


def status_url(document_id: str) -> str:
    """Relative URL of a document's status."""
    return f"/v1/documents/{document_id}"


def _check_fields(key_project: str, project: Optional[str], category: Optional[str],
                  document_id: Optional[str], callback_url: Optional[str]) -> tuple[str, str]:
    project = project or key_project
    category = category or "default"
    if project != key_project:
        raise HTTPException(403, f"this API key is not valid for project {project!r}")
    try:
        alias_name(project)
    except InvalidProjectName as exc:
        raise HTTPException(422, str(exc)) from exc
    if not NAME_RE.fullmatch(category):
        raise HTTPException(422, "category must match [A-Za-z0-9_-]{1,64}")
    if document_id is not None and not DOC_ID_RE.fullmatch(document_id):
        raise HTTPException(422, "document_id must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}")
    if callback_url is not None:
        try:
            check_url_syntax(callback_url)
        except CallbackRefused as exc:
            raise HTTPException(422, exc.reason) from exc
    return project, category


@router.post("/documents", status_code=202, response_model=UploadAccepted, openapi_extra=UPLOAD_OPENAPI,
             summary="Upload a document (multipart) or reference an object in S3 (JSON)")
async def upload(request: Request, key_project: str = Depends(require_project),
                 state: ApiState = Depends(get_state)) -> UploadAccepted:
    """Store the bytes, register the version, produce QUEUED and the upload event.

    Multipart: field ``file`` plus optional form fields ``project``, ``category``,
    ``document_id``, ``callback_url``, ``metadata`` (a JSON object).  JSON: :class:`ReferenceUpload`.  Same bytes as
    the latest version → ``queued=false`` and nothing new.  Errors: 401, 403 (another
    project), 413 (too large, nothing stored), 415, 422.  Document ids are the
    project's own (streams/document_ids.py): the same id in another project is
    another document, so no id is ever "taken".
    """
    settings = state.settings
    limit = settings.api_max_upload_bytes
    ctype = request.headers.get("content-type", "")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + MULTIPART_OVERHEAD:
        UPLOADS_TOTAL.labels("too_large").inc()
        raise HTTPException(413, f"upload exceeds the limit of {limit} bytes")
    if ctype.startswith("multipart/form-data"):
        return await _upload_multipart(request, key_project, state, ctype, limit)
    if ctype.startswith("application/json"):
        return await _upload_reference(request, key_project, state, limit)
    UPLOADS_TOTAL.labels("bad_request").inc()
    raise HTTPException(415, "send multipart/form-data (field 'file') or application/json (source)")


async def _upload_multipart(request: Request, key_project: str, state: ApiState, ctype: str,
                            limit: int) -> UploadAccepted:
    store = state.store
    try:
        fields, staged, _ = await receive_multipart(
            request.stream(), ctype, store=store, staging_prefix=f"staging/{key_project}/",
            max_bytes=limit, max_request_bytes=limit + MULTIPART_OVERHEAD)
    except UploadTooLarge as exc:
        UPLOADS_TOTAL.labels("too_large").inc()
        raise HTTPException(413, str(exc)) from exc
    except BadUpload as exc:
        UPLOADS_TOTAL.labels("bad_request").inc()
        raise HTTPException(422, str(exc)) from exc
    if staged is None:
        UPLOADS_TOTAL.labels("bad_request").inc()
        raise HTTPException(422, "multipart body has no 'file' part")
    if staged.size == 0:
        await store.client.delete_object(Bucket=store.bucket, Key=staged.key)
        UPLOADS_TOTAL.labels("bad_request").inc()
        raise HTTPException(422, "the file is empty")
    try:
        project, category = _check_fields(key_project, fields.get("project"), fields.get("category"),
                                          fields.get("document_id") or None,
                                          fields.get("callback_url") or None)
        try:
            user_metadata = parse_metadata(fields["metadata"]) if fields.get("metadata") else None
        except InvalidMetadata as exc:
            raise HTTPException(422, str(exc)) from exc
        return await _queue(state, staged, project=project, category=category,
                            document_id=fields.get("document_id") or None,
                            callback_url=fields.get("callback_url") or None,
                            source_bucket=store.bucket, user_metadata=user_metadata)
    finally:
        await store.client.delete_object(Bucket=store.bucket, Key=staged.key)


async def _upload_reference(request: Request, key_project: str, state: ApiState,
                            limit: int) -> UploadAccepted:
    try:
        ref = ReferenceUpload.model_validate_json(
            await read_capped(request.stream(), REFERENCE_BODY_MAX, "a JSON upload body"))
    except UploadTooLarge as exc:
        UPLOADS_TOTAL.labels("too_large").inc()
        raise HTTPException(413, str(exc)) from exc
    except ValidationError as exc:
        UPLOADS_TOTAL.labels("bad_request").inc()
        raise HTTPException(422, exc.errors(include_url=False, include_context=False, include_input=False)) from exc
    project, category = _check_fields(key_project, ref.project, ref.category, ref.document_id,
                                      ref.callback_url)
    settings, store = state.settings, state.store
    allowed = {b.strip() for b in settings.api_reference_buckets.split(",") if b.strip()}
    src = ref.source
    if not (src.bucket in allowed or
            (src.bucket == store.bucket and src.key.startswith(f"incoming/{project}/"))):
        raise HTTPException(403, f"objects may be referenced in s3://{store.bucket}/incoming/{project}/"
                                 " or in the buckets of RAGSTREAM_API_REFERENCE_BUCKETS")
    try:
        head = await store.client.head_object(Bucket=src.bucket, Key=src.key)
    except ClientError as exc:
        raise HTTPException(422, "cannot read the referenced object (S3 answered "
                                 f"{str(exc.response.get('Error', {}).get('Code'))[:32]})") from exc
    size = int(head["ContentLength"])
    if size == 0:
        raise HTTPException(422, "the referenced object is empty")
    if size > limit:
        UPLOADS_TOTAL.labels("too_large").inc()
        raise HTTPException(413, f"upload exceeds the limit of {limit} bytes")
    given = ref.filename or PurePosixPath(src.key).name or "upload"
    filename = safe_filename(given)
    ctype = head.get("ContentType") or mimetypes.guess_type(filename)[0] or "application/octet-stream"
    staged = StagedFile(src.key, filename, ctype, size, await hash_object(store, src.bucket, src.key),
                        given if given != filename else None)
    return await _queue(state, staged, project=project, category=category,
                        document_id=ref.document_id, callback_url=ref.callback_url,
                        source_bucket=src.bucket, user_metadata=ref.metadata)


async def _queue(state: ApiState, staged: StagedFile, *, project: str, category: str,
                 document_id: Optional[str], callback_url: Optional[str],
                 source_bucket: str, user_metadata: Optional[dict[str, Any]] = None) -> UploadAccepted:
    store = state.store
    # the id hashes the name as sent, so two names that sanitise alike stay two documents
    document_id = document_id or default_document_id(staged.original_filename or staged.filename)
    meta = original_name_metadata(staged.original_filename)

    async def put_raw(raw_key: str) -> None:  # server-side copy, no bytes through the API
        await store.client.copy_object(Bucket=store.bucket, Key=raw_key,
                                       CopySource={"Bucket": source_bucket, "Key": staged.key},
                                       ContentType=staged.content_type, Metadata=meta,
                                       MetadataDirective="REPLACE")

    result = await queue_version(
        project=project, category=category, filename=staged.filename, sha256=staged.sha256,
        size=staged.size, content_type=staged.content_type, store=store, metadata=state.metadata,
        producer=state.producer, put_raw=put_raw, document_id=document_id,
        callback_url=callback_url, user_metadata=user_metadata)
    if result.queued:
        # project QUEUED now so GET answers at once (monotonic: harmless when the
        # projection agent applies the same transition)
        await state.metadata.apply_status(status_event(
            result.document_id, result.version, DocumentStatus.QUEUED, stage="upload",
            project=project, filename=staged.filename, callback_url=callback_url))
        UPLOADS_TOTAL.labels("queued").inc()
        UPLOAD_BYTES.inc(staged.size)
    else:
        UPLOADS_TOTAL.labels("unchanged").inc()
    row = await state.metadata.get_document(result.document_id)
    return UploadAccepted(
        document_id=result.local_id, version=result.version,
        status=row["status"] if row else DocumentStatus.QUEUED.value, queued=result.queued,
        reason=result.reason, sha256=staged.sha256, size=staged.size,
        status_url=status_url(result.local_id), filename=staged.filename,
        original_filename=staged.original_filename)


async def _document_out(state: ApiState, row: dict[str, Any], version_row: Optional[dict[str, Any]],
                        with_callbacks: bool) -> DocumentOut:
    output = None
    if row["status"] == DocumentStatus.COMPLETED.value:
        key = processed_key(row["project"], row["document_id"], row["version"])
        output = {"bucket": state.store.bucket, "key": key, "url": f"s3://{state.store.bucket}/{key}"}
    callbacks = []
    if with_callbacks:
        callbacks = [CallbackInfo(**c) for c in await state.callbacks.for_document(row["document_id"])]
    vr = version_row if version_row and version_row["version"] == row["version"] else None
    if row["status"] == DocumentStatus.DELETED.value:
        vr = None  # no sha256 or size of a deleted document: they would confirm a guess of its bytes
    own_id = local_id(row["project"], row["document_id"])
    return DocumentOut(
        document_id=own_id, project=row["project"],
        category=vr["category"] if vr else "", filename=row["filename"], version=row["version"],
        status=row["status"], stage=row["stage"], chunks_total=row["chunks_total"],
        chunks_done=row["chunks_done"], pages=row["pages"], error=row["error"],
        error_code=row.get("error_code"), sha256=vr["sha256"] if vr else "", size=vr["size"] if vr else 0, output=output,
        callbacks=callbacks, metadata=orjson.loads(vr["user_metadata"]) if vr and vr.get("user_metadata") else None,
        partial=bool(row.get("partial")),
        failed_parts=orjson.loads(row["failed_parts"]) if row.get("failed_parts") else [],
        created_at=row["created_at"], updated_at=row["updated_at"],
        status_url=status_url(own_id))


async def owned_document(state: ApiState, document_id: str, project: str) -> dict[str, Any]:
    """The projection row of the key's project's document ``document_id`` (its own
    id: looked up by the scoped id, so another project's document is unreachable);
    404 when there is none or the id is malformed."""
    try:
        key = scoped_id(project, document_id)
    except (InvalidDocumentId, InvalidProjectName):
        raise HTTPException(404, "document not found") from None
    row = await state.metadata.get_document(key)
    if row is None or row["project"] != project:
        raise HTTPException(404, "document not found")
    return row


@router.get("/documents/{document_id}", response_model=DocumentOut,
            responses={404: {"description": "no such document in this key's project"}})
async def get_document(document_id: str, project: str = Depends(require_project),
                       state: ApiState = Depends(get_state)) -> DocumentOut:
    """Status, version, stage, counts, error, timestamps and callbacks of a document."""
    row = await owned_document(state, document_id, project)
    return await _document_out(state, row, await state.metadata.latest_version(row["document_id"]), True)


@router.get("/documents", response_model=DocumentPage,
            responses={422: {"description": "a bad status, limit, offset or cursor, or both "
                                             "an offset and a cursor"}})
async def list_documents(
        project: Optional[str] = Query(None, description="defaults to the key's project"),
        status: Optional[DocumentStatus] = Query(None),
        limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=10_000_000),
        cursor: Optional[str] = Query(None, max_length=MAX_CURSOR_CHARS,
                                      description="next_cursor of the previous page: pages that "
                                                  "stay exact while documents are uploaded"),
        key_project: str = Depends(require_project),
        state: ApiState = Depends(get_state)) -> DocumentPage:
    """Documents of the key's project, newest upload first (``created_at``, which never
    changes, so a document does not move between pages while it is processed), with
    offset or cursor paging (:mod:`api.listing_cursor`)."""
    if project is not None and project != key_project:
        raise HTTPException(404, "project not found")
    if cursor is not None and offset:
        raise HTTPException(422, "give either offset or cursor, not both")
    after: tuple[Optional[datetime], Optional[str]] = (None, None)
    if cursor is not None:
        try:
            after = decode_cursor(cursor)
        except BadCursor as exc:
            raise HTTPException(422, str(exc)) from None
    status_value = status.value if status else None
    rows = [dict(r) for r in await state.metadata.pool.fetch(
        "SELECT d.*, v.category, v.sha256, v.size, v.user_metadata::text AS user_metadata,"
        " CASE WHEN d.status = 'FAILED' THEN v.error_code END AS error_code"
        " FROM documents d LEFT JOIN document_versions v"
        " ON v.document_id = d.document_id AND v.version = d.version"
        " WHERE d.project = $1 AND ($2::text IS NULL OR d.status = $2)"
        " AND ($5::timestamptz IS NULL OR (d.created_at, d.document_id) < ($5, $6::text))"
        " ORDER BY d.created_at DESC, d.document_id DESC LIMIT $3 OFFSET $4",
        key_project, status_value, limit, offset, after[0], after[1])]
    total = await state.metadata.pool.fetchval(
        "SELECT count(*) FROM documents WHERE project = $1 AND ($2::text IS NULL OR status = $2)",
        key_project, status_value)
    items = [await _document_out(state, r, r if r.get("sha256") else None, False) for r in rows]
    nxt = offset + len(rows) if cursor is None and offset + len(rows) < total else None
    next_cursor = encode_cursor(rows[-1]["created_at"], rows[-1]["document_id"]) \
        if len(rows) == limit else None
    return DocumentPage(items=items, limit=limit, offset=offset, next_offset=nxt,
                        next_cursor=next_cursor, total=total)


@router.delete("/documents/{document_id}", status_code=202, response_model=DeleteAccepted,
               responses={404: {"description": "no such document in this key's project"}})
async def delete_document(document_id: str,
                          callback_url: Optional[str] = Query(
                              None, description="defaults to the callback URL of the upload"),
                          project: str = Depends(require_project),
                          state: ApiState = Depends(get_state)) -> DeleteAccepted:
    """Produce a delete event: the pipeline removes the document's chunks from Milvus
    and its objects, then marks it DELETED (a callback fires when one is set)."""
    if callback_url is not None:
        _check_fields(project, None, None, None, callback_url)
    try:
        result = await delete_in_project(project=project, document_id=document_id,
                                         bucket=state.store.bucket, producer=state.producer,
                                         metadata=state.metadata, callback_url=callback_url)
    except DocumentNotFound:
        raise HTTPException(404, "document not found") from None
    return DeleteAccepted(document_id=document_id, version=result.version, queued=result.queued,
                          status_url=status_url(document_id))
