"""Upload events: the head of the pipeline (topic ``uploads``, key: document id).

An upload event carries references to the raw object in object storage (claim
check), never the document bytes.
"""
from __future__ import annotations

from typing import Optional

import faust

from schemas import codec  # noqa: F401  (registers the orjson codec)

UPLOAD = "upload"
DELETE = "delete"


class UploadEvent(faust.Record, serializer=codec.CODEC_NAME):
    """A request to ingest (``action="upload"``) or remove (``"delete"``) one version.

    Fields: ``bucket``/``key`` locate the raw bytes; ``sha256`` (hex) and ``size``
    (bytes) describe them; ``version`` is 1-based and assigned by the uploader.
    """

    document_id: str
    version: int
    action: str
    project: str
    category: str
    filename: str
    bucket: str
    key: str
    sha256: str
    size: int
    content_type: str = "application/octet-stream"
    callback_url: Optional[str] = None
    submitted_at: float = 0.0
    bulk: bool = False  # in a project's burst: the bulk lane of every topic (topics/lanes.py)
    sealed: Optional[str] = None  # content fields sealed with the version's data key (schemas/sealing.py)
    schema_version: int = 1
