"""Uploading documents: store the raw bytes, register the version, produce the event.

Used by the CLI (``ragstream ingest``) and the HTTP API.  The document id defaults
to a stable hash of the file's path relative to what was ingested
(streams/document_ids.py), so ingesting a changed file at the same path makes version
n+1 of the same document, and the same bytes again make nothing.  The id a caller
gives or gets is its project's own; what is registered and sent is the scoped id
``{project}.{id}`` (``IngestResult.document_id``; ``IngestResult.local_id`` is the
project's own).
"""
from __future__ import annotations

import mimetypes
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Awaitable, Callable, Optional

from adapters.document_keys import DocumentKeys
from adapters.metadata import Metadata
from adapters.object_keys import raw_key
from adapters.object_store import ObjectStore, sha256_file
from adapters.vector_store import InvalidProjectName, alias_name
from streams.document_ids import InvalidDocumentId, default_document_id, local_id, scoped_id
from stages.filenames import original_name_metadata, safe_filename
from schemas import DELETE, UPLOAD, DocumentStatus, UploadEvent, status_event
from streams import tracing
from streams.kafka_io import send_record
from streams.settings import get_settings
from topics import STATUS, UPLOADS
from topics.lanes import burst_lane, half_partition


@dataclass(frozen=True)
class IngestResult:
    """What happened to one file: its scoped id (``{project}.{id}``, the pipeline's
    key) and version, and whether an event was sent."""

    path: Path
    document_id: str
    version: int
    queued: bool
    reason: str = ""
    raw_key: str = ""
    project: str = ""

    @property
    def local_id(self) -> str:
        """The project's own id of the document (what the API and the CLI show)."""
        return local_id(self.project, self.document_id)


async def ingest_file(path: Path, *, project: str, category: str, store: ObjectStore,
                      metadata: Metadata, producer, document_id: Optional[str] = None,
                      callback_url: Optional[str] = None, force: bool = False,
                      source_path: Optional[str] = None, user_metadata: Optional[dict] = None,
                      filename: Optional[str] = None, sha256: Optional[str] = None,
                      burst: Optional[int] = None) -> IngestResult:
    """Upload one file and queue it.

    ``document_id``: the project's own id; None: :func:`default_document_id` of
    ``source_path`` (the path relative to an ingested directory, ``/``-separated),
    else of the file's name.  ``filename``: the original name to store (default
    ``path.name``: a sync stages an S3 object in a file of another name);
    ``sha256``: the file's hex SHA-256 when the caller hashed it already (else it
    is read here); ``burst``: :func:`queue_version`'s.

    Same bytes as the document's latest version → nothing is sent (``queued=False``)
    unless ``force`` (then the same version is re-sent: a no-op for the index).
    The stored name is ``stages.filenames.safe_filename`` of the original name; the original
    (when it differs) is the raw object's S3 metadata ``original-filename``.
    Raises InvalidProjectName for a project that cannot name a collection, and
    FileNotFoundError for a missing path.
    """
    alias_name(project)  # validates the project name before anything is stored
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(path)
    original = filename or path.name
    filename = safe_filename(original)  # sanitised once, here at the CLI's edge
    content_type = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    meta = original_name_metadata(original if original != filename else None)
    document_id = document_id or default_document_id(source_path or original)

    async def put_raw(key: str) -> None:
        await store.put_file(key, path, content_type, metadata=meta)

    result = await queue_version(
        project=project, category=category, filename=filename, sha256=sha256 or sha256_file(path),
        size=path.stat().st_size, content_type=content_type, store=store, metadata=metadata,
        producer=producer, put_raw=put_raw, document_id=document_id, callback_url=callback_url,
        force=force, user_metadata=user_metadata, burst=burst)
    return replace(result, path=path)


async def queue_version(*, project: str, category: str, filename: str, sha256: str, size: int,
                        content_type: str, store: ObjectStore, metadata: Metadata, producer,
                        put_raw: Callable[[str], Awaitable[None]],
                        document_id: Optional[str] = None, callback_url: Optional[str] = None,
                        force: bool = False, user_metadata: Optional[dict] = None,
                        require_live: bool = False, new_version: bool = False,
                        burst: Optional[int] = None) -> IngestResult:
    """Register a version of bytes whose ``sha256`` (hex) and ``size`` (bytes) are
    known, store them with ``put_raw(raw_key)`` and produce QUEUED + the upload event.

    The shared tail of the CLI (a local file) and the HTTP API (a body streamed to a
    staging object, or an object referenced in S3).  Same bytes as the latest version
    → nothing is stored or sent (``queued=False``, ``reason="unchanged"``) unless
    ``force`` — or unless that version's events were never sent (an earlier attempt
    lost the broker after registering it): then this call sends them.
    ``document_id``: the project's own id (None: :func:`default_document_id` of
    ``filename``); the version is registered under the scoped id
    ``{project}.{document_id}``, which the result carries.
    ``user_metadata``: the client's metadata object, already validated
    (schemas/user_metadata.py); None keeps the latest version's, and a different one
    makes a new version of the same bytes (``Metadata.register_version``);
    ``require_live``: raise ``adapters.metadata.DocumentGone`` when a delete covers the
    document's latest version (a metadata update); ``new_version``: a new version even
    of unchanged bytes and metadata (``ragstream reprocess``, streams/reprocess.py);
    ``burst``: the project lanes' threshold (None: the ``fair_project_burst`` setting;
    0: off) — a version of a project with more in flight goes to the bulk lane
    (:func:`upload_partition`).
    ``result.path`` is ``Path(filename)``.  Raises InvalidDocumentId for a malformed
    id, and the broker's errors when it is unreachable
    (the version stays registered and unqueued: a retry or the normalize worker's
    sweep sends it).
    """
    alias_name(project)
    document_id = scoped_id(project, document_id or default_document_id(filename))
    ext = Path(filename).suffix.lstrip(".").lower()
    alloc = await metadata.register_version(
        document_id=document_id, project=project, category=category, filename=filename,
        sha256=sha256, size=size, callback_url=callback_url, content_type=content_type,
        raw_key_for=lambda v: raw_key(project, category, v, document_id, ext), user_metadata=user_metadata,
        require_live=require_live, new_version=new_version)
    if not alloc.created and alloc.queued and not force:
        return IngestResult(Path(filename), document_id, alloc.version, False, "unchanged",
                            raw_key=alloc.raw_key, project=project)
    # a new version, a forced re-send, or a version whose first upload never got its
    # events out (outbox: queued_at is set only once the broker acknowledged them)
    if alloc.created or not await store.exists(alloc.raw_key):
        await put_raw(alloc.raw_key)
    bulk, partition = await upload_partition(project, document_id, metadata, producer, burst)
    event = UploadEvent(
        document_id=document_id, version=alloc.version, action=UPLOAD, project=project,
        category=category, filename=filename, bucket=store.bucket, key=alloc.raw_key,
        sha256=sha256, size=size, content_type=content_type,
        callback_url=callback_url, submitted_at=time.time(), bulk=bulk)
    keys = DocumentKeys(metadata.pool)  # the version's data key is made here (sealing)
    with tracing.root_span("upload", event):  # the version's trace starts here
        await send_record(producer, STATUS, document_id, await keys.seal(status_event(
            document_id, alloc.version, DocumentStatus.QUEUED, stage="upload", project=project,
            filename=filename, callback_url=callback_url)))
        await send_record(producer, UPLOADS, document_id, await keys.seal(event), partition=partition)
    await metadata.mark_queued(document_id, alloc.version)
    return IngestResult(Path(filename), document_id, alloc.version, True, raw_key=alloc.raw_key,
                        project=project)


async def upload_partition(project: str, document_id: str, metadata: Metadata, producer,
                           burst: Optional[int] = None) -> tuple[bool, Optional[int]]:
    """``(bulk, partition)`` of an upload event on ``uploads``: bulk when ``project``
    has more than ``burst`` versions (None: the ``fair_project_burst`` setting) in
    flight — registered in the last ``fair_project_window_s`` seconds, this one
    included, and not finished (topics/lanes.py ``burst_lane``) — and the partition in
    that lane's half; ``(False, None)`` (the key picks) when project lanes are off
    (``burst`` 0)."""
    settings = get_settings()
    burst = settings.fair_project_burst if burst is None else burst
    if burst <= 0:
        return False, None
    in_flight = await metadata.in_flight_versions(project, settings.fair_project_window_s, burst + 1)
    bulk = burst_lane(in_flight, burst)
    partitions = len(await producer.partitions_for(UPLOADS.name) or ())
    return bulk, half_partition(document_id, bulk, partitions)


async def queue_delete(*, document_id: str, version: int, project: str, category: str,
                       filename: str, bucket: str, key: str, sha256: str, size: int,
                       producer, metadata: Metadata, callback_url: Optional[str] = None,
                       through_latest: bool = False) -> UploadEvent:
    """Produce a delete request (``action="delete"``) for a document.

    The tombstone (every version up to ``version``; with ``through_latest``, any
    registered meanwhile too: the event carries the version it covers) is written to the
    ledger first, so work in flight for those versions stops and whatever it indexes
    afterwards is removed again (agents/index.py); then normalize applies the
    request: the chunks leave Milvus, the objects of every version leave storage,
    and the status becomes DELETED.  Returns the event sent.
    """
    version = await metadata.ledger.record_deletion(document_id, project, version, through_latest)
    event = UploadEvent(
        document_id=document_id, version=version, action=DELETE, project=project,
        category=category, filename=filename, bucket=bucket, key=key, sha256=sha256,
        size=size, callback_url=callback_url, submitted_at=time.time())
    await send_record(producer, UPLOADS, document_id, await DocumentKeys(metadata.pool).seal(event))
    return event


class DocumentNotFound(LookupError):
    """No document of that id in the project (never registered, a malformed id, or
    another project's: ids resolve only inside their own project)."""


@dataclass(frozen=True)
class DeleteResult:
    """What :func:`delete_document` did: the scoped id and latest version of the
    document, and whether a delete request was sent (False: already DELETED)."""

    document_id: str
    version: int
    queued: bool
    project: str

    @property
    def local_id(self) -> str:
        """The project's own id of the document."""
        return local_id(self.project, self.document_id)


async def delete_document(*, project: str, document_id: str, bucket: str, producer,
                          metadata: Metadata, callback_url: Optional[str] = None) -> DeleteResult:
    """Delete the document ``document_id`` (the project's own id) of ``project``: the
    one path of ``DELETE /v1/documents/{id}``, ``ragstream delete`` and ``ragstream
    sync``.  ``bucket``: the object store's bucket (for the event).

    Looked up in the version registry (written synchronously, unlike the projection),
    by the scoped id, so another project's document is never reached.  Every
    version up to the latest is deleted (:func:`queue_delete`); ``callback_url``
    defaults to the document's (its projection's, else its latest version's).  A document the projection shows DELETED at
    its latest version gets nothing sent (``queued=False``); one whose delete is
    still in flight gets it again (normalize's delete is idempotent), so a caller
    killed half-way can simply call again.  Raises DocumentNotFound.
    """
    try:
        key = scoped_id(project, document_id)
    except (InvalidDocumentId, InvalidProjectName):
        raise DocumentNotFound(f"no document {document_id!r} in project {project!r}") from None
    latest = await metadata.latest_version(key)
    if latest is None or latest["project"] != project:
        raise DocumentNotFound(f"no document {document_id!r} in project {project!r}")
    row = await metadata.get_document(key)
    if (row is not None and row["status"] == DocumentStatus.DELETED.value
            and row["version"] >= latest["version"]):
        return DeleteResult(key, latest["version"], False, project)
    callback = callback_url or (row or {}).get("callback_url") or latest.get("callback_url")
    event = await queue_delete(
        document_id=key, version=latest["version"], project=project, category=latest["category"],
        filename=latest["filename"], bucket=bucket, key=latest["raw_key"], sha256=latest["sha256"],
        size=latest["size"], producer=producer, metadata=metadata, callback_url=callback,
        through_latest=True)
    return DeleteResult(key, event.version, True, project)
