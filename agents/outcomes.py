"""Terminal outcomes of a document version: failing, completing, announcing.

A version ends once: the outcome is claimed in the ledger first
(adapters/version_ledger.py, first writer wins), then its status event is sent and
the claim marked announced.  A crash between claim and announcement is healed by the
next event of that version that reaches any stage (agents/runner.py re-announces).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Optional

from adapters.failed_parts import failed_parts
from adapters.version_ledger import Outcome
from agents.context import StageContext
from agents.retry_policy import retry_transient
from schemas import DeadLetter, DocumentStatus
from stages.errors import decode_reason, encode_reason

log = logging.getLogger(__name__)


async def announce(ctx: StageContext, ref: Any, outcome: Outcome, *, stage: str) -> None:
    """Send the status event of a claimed outcome and mark it announced.

    COMPLETED first removes the document's older versions from Milvus, so search
    holds only the current version once the event is out; a version with failed
    parts (adapters/failed_parts.py) completes with ``partial`` and their list.  ``ref`` is any record
    of the version (document_id, version, project, filename, callback_url).

    The event's ``at`` is the claim's time (``outcome.at``), not now: a worker
    killed after the send and before the marker announces again on the next
    delivery, and that must be the same event delivered twice (consumers are
    idempotent to it), not a second completion (duplicate_completions=1 in a CI
    kill-workers drill, 2026-12-02).
    """
    ledger = (await ctx.resources.metadata()).ledger
    if outcome.outcome == DocumentStatus.COMPLETED.value:
        await ctx.resources.vectors.delete_versions_below(ref.project, ref.document_id, ref.version)
        missing = await failed_parts(ledger.pool, ref.document_id, ref.version)
        await ctx.emit(ref, DocumentStatus.COMPLETED, stage=stage, chunks_total=outcome.chunks,
                       chunks_done=outcome.chunks, at=outcome.at, failed_parts=missing)
    else:
        await ctx.resources.vectors.delete_version(ref.project, ref.document_id, ref.version)
        code, reason = decode_reason(outcome.reason)
        await ctx.emit(ref, DocumentStatus.FAILED, stage=stage, error=reason,
                       error_code=code or "internal", at=outcome.at)
    await ctx.delivered()  # the status event is stored before the announced marker
    # the marker alone is retried through a PostgreSQL outage: retrying the whole
    # announcement sent the status event twice (duplicate_completions=1 in a
    # 30-document restart-postgres drill, 2026-12-02)
    await retry_transient(lambda: ledger.mark_announced(ref.document_id, ref.version),
                          describe=f"{stage}: marking {ref.document_id} v{ref.version} announced")


async def complete_version(ctx: StageContext, ref: Any, *, chunks: int, stage: str) -> None:
    """Claim COMPLETED for ``ref``'s version with ``chunks`` indexed, and announce it
    (unless the version already FAILED, or was announced before)."""
    ledger = (await ctx.resources.metadata()).ledger
    outcome = await ledger.claim_outcome(document_id=ref.document_id, version=ref.version,
                                         project=ref.project, outcome="COMPLETED", chunks=chunks)
    if not outcome.announced:
        await announce(ctx, ref, outcome, stage=stage)


async def fail_version(ctx: StageContext, ref: Any, *, stage: str, source_topic: str, error: str,
                       attempts: int, payload: Optional[dict] = None, code: str = "internal",
                       detail: Optional[str] = None) -> None:
    """Fail ``ref``'s version with the human sentence ``error`` and the failure
    ``code`` (stages.errors.CODES): claim FAILED (the ledger keeps both as
    ``"[code] sentence"``), dead-letter the event (its error also carries ``detail``,
    the internal text), announce FAILED.  A version that already COMPLETED stays
    COMPLETED (the error is logged and the event dead-lettered for inspection,
    nothing else)."""
    ledger = (await ctx.resources.metadata()).ledger
    outcome = await ledger.claim_outcome(document_id=ref.document_id, version=ref.version,
                                         project=ref.project, outcome="FAILED",
                                         reason=encode_reason(code, error))
    await ctx.topics.dead_letters.send(key=ref.document_id, value=DeadLetter(
        document_id=ref.document_id, version=ref.version, stage=stage, source_topic=source_topic,
        error=f"[{code}] {error}" + (f" ({detail})" if detail else ""), attempts=attempts,
        payload=payload or {}, at=time.time()))
    if outcome.outcome != "FAILED":
        log.warning("%s: %s v%s failed [%s] after it %s (the reason may quote the document: "
                    "in its dead letter)", stage, ref.document_id, ref.version, code, outcome.outcome)
        return
    if not outcome.announced:
        await announce(ctx, ref, outcome, stage=stage)
