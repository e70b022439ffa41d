"""Status changelog records (compacted topic ``status``, key: document id).

The sequence number orders transitions: ``seq = version * 100 + rank(status)``, so
a projection can compare any two events for the same document and never move it
backwards, whatever order they arrive in, and a duplicate compares equal.

A version has ONE terminal state: COMPLETED and FAILED share a rank (90), so the
first to be projected stays; the pipeline only ever emits one of them per version
(the outcome is claimed in the ledger first, adapters/version_ledger.py).  DELETED
(99) supersedes either; a newer version supersedes everything of an older one.
"""
from __future__ import annotations

import enum
import time
from typing import Optional

import faust

from schemas import codec


class DocumentStatus(str, enum.Enum):
    """Lifecycle of a document version, in pipeline order."""

    QUEUED = "QUEUED"
    NORMALIZING = "NORMALIZING"
    PARTITIONING = "PARTITIONING"
    CHUNKING = "CHUNKING"
    ENHANCING = "ENHANCING"
    EMBEDDING = "EMBEDDING"
    INDEXING = "INDEXING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    DELETED = "DELETED"

    @property
    def rank(self) -> int:
        """Order within a version: 1..7 in pipeline order, 90 for both terminal
        outcomes (COMPLETED, FAILED: one per version, the first stays), 99 DELETED."""
        return _RANKS[self]

    @property
    def terminal(self) -> bool:
        """True for COMPLETED, FAILED and DELETED."""
        return self in TERMINAL


TERMINAL = frozenset({DocumentStatus.COMPLETED, DocumentStatus.FAILED, DocumentStatus.DELETED})
_RANKS = {s: i + 1 for i, s in enumerate(DocumentStatus) if s not in TERMINAL}
_RANKS.update({DocumentStatus.COMPLETED: 90, DocumentStatus.FAILED: 90, DocumentStatus.DELETED: 99})


def sequence(version: int, status: DocumentStatus) -> int:
    """Monotonic sequence of a transition: ``version * 100 + rank``."""
    return version * 100 + status.rank


class StatusEvent(faust.Record, serializer=codec.CODEC_NAME):
    """One status transition of one document version.

    ``at`` is the Unix time in seconds; ``chunks_total``/``chunks_done`` count the
    version's chunks (0 until known); ``error`` is a specific, readable reason (a
    sentence for people, never raw exception text); ``error_code`` its stable code
    (``stages.errors.CODES``: ``corrupt``, ``timeout``, …; FAILED only).  Events
    written before ``error_code`` existed decode with it None, and consumers that do
    not know it drop it (schemas/decode.py), so it needs no ``schema_version`` bump.
    ``partial`` (COMPLETED only): some parts failed for good or were skipped, and
    ``failed_parts`` lists them, ``[{"part", "code", "reason"}]``
    (adapters/failed_parts.py; sealed on the topic: a reason may name an attachment).
    Both default, so older records decode as whole documents.
    """

    document_id: str
    version: int
    status: str
    seq: int
    stage: str
    project: str
    filename: str = ""
    chunks_total: int = 0
    chunks_done: int = 0
    pages: int = 0
    error: Optional[str] = None
    callback_url: Optional[str] = None
    at: float = 0.0
    sealed: Optional[str] = None  # content fields sealed with the version's data key (schemas/sealing.py)
    schema_version: int = 1
    error_code: Optional[str] = None
    partial: bool = False
    failed_parts: list = []


def status_event(
    document_id: str,
    version: int,
    status: DocumentStatus,
    *,
    stage: str,
    project: str,
    filename: str = "",
    chunks_total: int = 0,
    chunks_done: int = 0,
    pages: int = 0,
    error: Optional[str] = None,
    callback_url: Optional[str] = None,
    error_code: Optional[str] = None,
    at: Optional[float] = None,
    failed_parts: Optional[list] = None,
) -> StatusEvent:
    """Build a StatusEvent with its sequence; ``at`` (Unix seconds) defaults to now.
    A terminal event passes its outcome's claim time, so re-sending it is the same
    event (agents/outcomes.announce)."""
    return StatusEvent(
        document_id=document_id,
        version=version,
        status=status.value,
        seq=sequence(version, status),
        stage=stage,
        project=project,
        filename=filename,
        chunks_total=chunks_total,
        chunks_done=chunks_done,
        pages=pages,
        error=error,
        callback_url=callback_url,
        at=time.time() if at is None else at,
        partial=bool(failed_parts),
        failed_parts=list(failed_parts or []),
        error_code=error_code,
    )
