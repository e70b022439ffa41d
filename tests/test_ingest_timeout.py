"""``ragstream ingest --wait`` on timeout names the documents that did not finish,
with their last status and file (a newcomer's corpus ingest timed out after 900 s
with one document at INDEXING and no word of which)."""
from __future__ import annotations

from pathlib import Path

from cli.progress import IngestOutcome
from schemas import StatusEvent
from streams.ingest import IngestResult


def _event(doc: str, status: str) -> StatusEvent:
    return StatusEvent(document_id=doc, version=1, status=status, seq=1, stage="index", project="p")


def test_pending_summary_names_unfinished_documents_with_status_and_file():
    outcome = IngestOutcome([IngestResult(Path("c/a.pdf"), "doc-a", 1, True),
                             IngestResult(Path("c/b.pdf"), "doc-b", 1, True),
                             IngestResult(Path("c/c.txt"), "doc-c", 2, True)])
    outcome.last = {"doc-a": _event("doc-a", "COMPLETED"), "doc-b": _event("doc-b", "INDEXING")}
    wanted = {"doc-a": 1, "doc-b": 1, "doc-c": 2}
    assert outcome.pending_summary(wanted) == "doc-b v1 INDEXING (b.pdf), doc-c v2 no status yet (c.txt)"
    outcome.last["doc-b"] = _event("doc-b", "FAILED")
    outcome.last["doc-c"] = _event("doc-c", "COMPLETED")
    assert outcome.pending_summary(wanted) == "none"
