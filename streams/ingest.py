"""Uploading documents: store the raw bytes, register the version, produce the event.

Used by the CLI (``ragstream ingest``) and the HTTP API.  The document id defaults
to a stable hash of (project, file name), so ingesting a changed file with the same
name makes version n+1 of the same document, and the same bytes again make nothing.
"""
from __future__ import annotations

import hashlib
import mimetypes
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adapters.metadata import Metadata
from adapters.object_keys import raw_key
from adapters.object_store import ObjectStore, sha256_file
from adapters.vector_store import alias_name
from schemas import UPLOAD, DocumentStatus, UploadEvent, status_event
from streams.kafka_io import send_record
from topics import STATUS, UPLOADS


def default_document_id(project: str, filename: str) -> str:
    """``doc-`` + the first 20 hex digits of sha1(project/filename)."""
    return "doc-" + hashlib.sha1(f"{project}/{filename}".encode()).hexdigest()[:20]


@dataclass(frozen=True)
class IngestResult:
    """What happened to one file: its id and version, and whether an event was sent."""

    path: Path
    document_id: str
    version: int
    queued: bool
    reason: str = ""


async def ingest_file(path: Path, *, project: str, category: str, store: ObjectStore,
                      metadata: Metadata, producer, document_id: Optional[str] = None,
                      callback_url: Optional[str] = None, force: bool = False) -> IngestResult:
    """Upload one file and queue it.

    Same bytes as the document's latest version → nothing is sent (``queued=False``)
    unless ``force`` (then the same version is re-sent: a no-op for the index).
    Raises InvalidProjectName for a project that cannot name a collection, and
    FileNotFoundError for a missing path.
    """
    alias_name(project)  # validates the project name before anything is stored
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(path)
    filename = path.name
    document_id = document_id or default_document_id(project, filename)
    digest = sha256_file(path)
    ext = path.suffix.lstrip(".").lower()
    alloc = await metadata.register_version(
        document_id=document_id, project=project, category=category, filename=filename,
        sha256=digest, size=path.stat().st_size,
        raw_key_for=lambda v: raw_key(project, category, v, document_id, ext))
    if not alloc.created and not force:
        return IngestResult(path, document_id, alloc.version, False, "unchanged")
    content_type = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    if alloc.created or not await store.exists(alloc.raw_key):
        await store.put_file(alloc.raw_key, path, content_type)
    event = UploadEvent(
        document_id=document_id, version=alloc.version, action=UPLOAD, project=project,
        category=category, filename=filename, bucket=store.bucket, key=alloc.raw_key,
        sha256=digest, size=path.stat().st_size, content_type=content_type,
        callback_url=callback_url, submitted_at=time.time())
    await send_record(producer, STATUS, document_id, status_event(
        document_id, alloc.version, DocumentStatus.QUEUED, stage="upload", project=project,
        filename=filename, callback_url=callback_url))
    await send_record(producer, UPLOADS, document_id, event)
    return IngestResult(path, document_id, alloc.version, True)
