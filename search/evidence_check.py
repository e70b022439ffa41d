"""Is a question set answerable at all?  Every question's evidence checked against the
chunks of its document in an ingested project — no search, no ranking.

``eval retrieval`` can only find a question whose evidence (normalised, see
``search.evaluation.normalize_text``) is contained in ONE chunk's text.  Evidence
written against another view of the document (e.g. ``ragstream partition`` elements,
where a table is one element, while the chunker splits it into row pieces that repeat
the header, stages/table_split.py) may be contiguous in no chunk: such a question is a
miss under every ranking and measures nothing.  :func:`check_evidence` finds them, so
they can be re-anchored (from the chunks alone) before any ranking is measured.

Reads each document's chunks of its current version (the ledger's newest COMPLETED
version, adapters/version_ledger.py) from Milvus by filename; never calls search.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from search.evaluation import Question, normalize_text


@dataclass(frozen=True)
class EvidenceVerdict:
    """One question's verdict: ``status`` is ``"found"`` (its evidence is in ≥ 1 chunk of
    its document; ``chunks`` how many), ``"missing"`` (its document has ``chunks`` chunks,
    none holds the evidence) or ``"no-document"`` (no chunk of a current version has its
    file name); ``nearest`` the chunk text holding the longest prefix of the evidence
    (for a "missing" one: where to re-anchor it), None otherwise."""

    question: Question
    status: str
    chunks: int
    nearest: Optional[str] = None


def longest_prefix_in(evidence: str, text: str) -> int:
    """Length (characters) of the longest prefix of ``evidence`` contained in ``text``
    (both already normalised); binary search over prefix lengths, since a prefix of a
    contained string is contained."""
    lo, hi = 0, len(evidence)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if evidence[:mid] in text:
            lo = mid
        else:
            hi = mid - 1
    return lo


def verdict(question: Question, chunk_texts: list[str]) -> EvidenceVerdict:
    """The verdict for ``question`` given every chunk text of its document (raw; they
    are normalised here)."""
    if not chunk_texts:
        return EvidenceVerdict(question, "no-document", 0)
    evidence = normalize_text(question.evidence)
    normalised = [normalize_text(t) for t in chunk_texts]
    holding = sum(evidence in t for t in normalised)
    if holding:
        return EvidenceVerdict(question, "found", holding)
    best = max(range(len(normalised)), key=lambda i: longest_prefix_in(evidence, normalised[i]))
    return EvidenceVerdict(question, "missing", len(chunk_texts), chunk_texts[best])


async def document_chunk_texts(project: str, filenames: set[str], clients: Any) -> dict[str, list[str]]:
    """{filename: chunk texts of the current version of every document with that file
    name} for ``project``, read from Milvus (``clients``: ``search.query.SearchClients``)."""
    rows = await clients.vectors.chunk_texts(project, sorted(filenames))
    current = await clients.metadata.ledger.current_versions(sorted({r["document_id"] for r in rows}))
    out: dict[str, list[str]] = {name: [] for name in filenames}
    for row in rows:
        if current.get(row["document_id"]) == row["version"]:
            out[row["filename"]].append(row["text"])
    return out


async def check_evidence(questions: list[Question], *, project: str, settings: Any) -> list[EvidenceVerdict]:
    """A verdict per question (in order) against ``project``'s chunks."""
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from search.query import SearchClients

    store = VectorStore(settings.milvus_uri)
    try:
        async with Metadata(settings.pg_dsn) as metadata:
            texts = await document_chunk_texts(project, {q.filename for q in questions},
                                               SearchClients(metadata, store))
    finally:
        store.close()
    return [verdict(q, texts[q.filename]) for q in questions]
