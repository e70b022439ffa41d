"""How an agent fails one document without failing the worker.

A DocumentError (bad bytes, unsupported type, timeout) fails the document with its
reason.  Any other exception is retried (transient outages: S3, Milvus, Triton)
with exponential backoff; when the retries run out the event goes to the
dead-letter topic and the document to FAILED with the stage and the error.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, Optional

from tenacity import AsyncRetrying, retry_if_not_exception_type, stop_after_attempt, wait_exponential

from schemas import DeadLetter, DocumentStatus, status_event
from stages.errors import DocumentError
from stages.pool import StageTimeout, WorkerCrashed
from streams.metrics import STAGE_EVENTS, STAGE_SECONDS
from streams.bound_topics import BoundTopics

log = logging.getLogger(__name__)

ATTEMPTS = 3  # tries per event before it is dead-lettered
PERMANENT = (DocumentError, StageTimeout, WorkerCrashed)


def reason_of(exc: BaseException, stage: str) -> str:
    """A readable reason: a DocumentError's own reason, else ``stage: Type: message``."""
    if isinstance(exc, DocumentError):
        return exc.reason
    if isinstance(exc, (StageTimeout, WorkerCrashed)):
        return f"{stage}: {exc}"
    return f"{stage}: {type(exc).__name__}: {exc}"


async def fail_document(topics: BoundTopics, *, stage: str, source_topic: str, document_id: str,
                        version: int, project: str, filename: str, error: str, attempts: int,
                        payload: dict, callback_url: Optional[str] = None) -> None:
    """Send the event to the dead-letter topic and the document to FAILED."""
    await topics.dead_letters.send(key=document_id, value=DeadLetter(
        document_id=document_id, version=version, stage=stage, source_topic=source_topic,
        error=error, attempts=attempts, payload=payload, at=time.time()))
    await topics.status.send(key=document_id, value=status_event(
        document_id, version, DocumentStatus.FAILED, stage=stage, project=project,
        filename=filename, error=error, callback_url=callback_url))


async def run_guarded(topics: BoundTopics, *, stage: str, source_topic: str, event: Any,
                      work: Callable[[], Awaitable[None]], fail: bool = True) -> bool:
    """Run ``work()`` for one event with retries; on failure dead-letter and FAIL it.

    ``event`` has document_id, version, project, filename and ``asdict()`` (a Faust
    record).  Returns True when the work succeeded.  With ``fail=False`` a failure
    only returns False (the caller decides, e.g. retrying a batch per document).
    """
    attempts = 0
    started = time.perf_counter()
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(ATTEMPTS), wait=wait_exponential(multiplier=0.5, max=10),
            retry=retry_if_not_exception_type(PERMANENT), reraise=True,
        ):
            with attempt:
                attempts += 1
                if attempts > 1:
                    STAGE_EVENTS.labels(stage, "retried").inc()
                await work()
        STAGE_EVENTS.labels(stage, "ok").inc()
        STAGE_SECONDS.labels(stage).observe(time.perf_counter() - started)
        return True
    except Exception as exc:  # noqa: BLE001 — every failure becomes a FAILED document
        STAGE_EVENTS.labels(stage, "failed").inc()
        if not fail:
            log.warning("%s batch failed (%s); retrying per document", stage, exc)
            return False
        error = reason_of(exc, stage)
        if not isinstance(exc, DocumentError):
            log.exception("%s failed for %s v%s", stage, event.document_id, event.version)
        await fail_document(
            topics, stage=stage, source_topic=source_topic, document_id=event.document_id,
            version=event.version, project=event.project, filename=event.filename, error=error,
            attempts=attempts, payload=event.asdict(), callback_url=getattr(event, "callback_url", None))
        return False
