"""Retrieval evaluation: how often search puts a question's evidence in its top hits.

A question set is JSON lines, one object per line::

    {"question": "...", "file": "pdf/fake-memo.pdf", "evidence": "...", "kind": "pdf"}

``file`` is the document's path relative to the ingested folder (only its base name
is compared: ingestion records a document's file name, not its folder); ``evidence``
a short exact string of the document's extracted text; ``kind`` a free label the
figures are broken down by (text, table, sheet, slide, heading, korean, html, pdf,
scan, ...).  Blank lines and lines starting with ``#`` are skipped.

A question is *found at rank r* (1-based) when the r-th hit's ``filename`` equals the
question's file name AND the hit's text contains the evidence, both compared after
:func:`normalize_text` (Unicode NFC, case-folded, whitespace runs collapsed to one
space).  Its rank is ``None`` when no hit of the top k qualifies.

Figures: ``recall@n`` = share of questions found at rank ≤ n; ``mrr`` = mean of
1/rank (0 when not found) over the top k.  Hits beyond k are never seen, so recall@n
for n > k equals recall@k.
"""
from __future__ import annotations

import json
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Optional

from streams.settings import Settings

FIELDS = ("question", "file", "evidence", "kind")
CUTOFFS = (1, 5, 10)


class QuestionFileError(ValueError):
    """A question set that cannot be read: ``line`` (1-based, 0 for the whole file)
    and ``reason``."""

    def __init__(self, path: Path, line: int, reason: str):
        self.path, self.line, self.reason = path, line, reason
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")


@dataclass(frozen=True)
class Question:
    """One evaluation question (see the module docstring for the fields)."""

    question: str
    file: str
    evidence: str
    kind: str
    line: int = 0  # where it came from in its JSONL file (1-based)

    @property
    def filename(self) -> str:
        """The document's base name (what ingestion records as ``filename``)."""
        return PurePosixPath(self.file.replace("\\", "/")).name


@dataclass
class Outcome:
    """A question's result: ``rank`` (1-based, None when not in the top ``k``), the
    search's wall time (ms) and the top hits' file names (for a failure's context)."""

    question: Question
    rank: Optional[int]
    latency_ms: float
    top_files: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """One JSON-able record: question fields, rank, latency_ms, top_files."""
        q = asdict(self.question)
        q.pop("line")
        return {**q, "rank": self.rank, "latency_ms": round(self.latency_ms, 1),
                "top_files": self.top_files}


def normalize_text(text: str) -> str:
    """NFC, case-folded, every whitespace run one space, stripped."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())
    return " ".join(folded.split())


def load_questions(path: Path) -> list[Question]:
    """The questions of a JSONL file, in order.

    Raises :class:`QuestionFileError` naming the first bad line: not JSON, not an
    object, a missing or non-string or empty field of :data:`FIELDS`; or the file
    unreadable or without questions.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionFileError(path, 0, f"cannot read: {exc}") from exc
    out: list[Question] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise QuestionFileError(path, number, f"not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise QuestionFileError(path, number, f"expected a JSON object, got {type(obj).__name__}")
        for name in FIELDS:
            value = obj.get(name)
            if not isinstance(value, str) or not value.strip():
                raise QuestionFileError(path, number, f"field {name!r} missing or not a non-empty string")
        out.append(Question(obj["question"], obj["file"], obj["evidence"], obj["kind"], number))
    if not out:
        raise QuestionFileError(path, 0, "no questions")
    return out


def rank_of(question: Question, hits: Iterable[dict[str, Any]]) -> Optional[int]:
    """The 1-based rank of the first hit from the question's file whose text holds the
    evidence (normalised), or None."""
    evidence = normalize_text(question.evidence)
    for rank, hit in enumerate(hits, 1):
        if hit.get("filename") == question.filename and evidence in normalize_text(hit.get("text", "")):
            return rank
    return None


@dataclass
class Figures:
    """``recall`` {n: share found at rank ≤ n} for n in :data:`CUTOFFS`, ``mrr``, the
    question count ``n``, and per-kind ``(found in top 5, count)``."""

    recall: dict[int, float]
    mrr: float
    n: int
    by_kind: dict[str, tuple[int, int]]

    def last_line(self) -> str:
        """``recall@1=… recall@5=… recall@10=… mrr=…`` with 4 decimals."""
        return " ".join([*(f"recall@{c}={self.recall[c]:.4f}" for c in CUTOFFS), f"mrr={self.mrr:.4f}"])


def figures(outcomes: list[Outcome]) -> Figures:
    """Recall at each cutoff, MRR and per-kind recall@5 of ``outcomes`` (non-empty)."""
    n = len(outcomes)
    ranks = [o.rank for o in outcomes]
    recall = {c: sum(r is not None and r <= c for r in ranks) / n for c in CUTOFFS}
    mrr = sum(1.0 / r for r in ranks if r is not None) / n
    by_kind: dict[str, tuple[int, int]] = {}
    for o in outcomes:
        found, total = by_kind.get(o.question.kind, (0, 0))
        by_kind[o.question.kind] = (found + (o.rank is not None and o.rank <= 5), total + 1)
    return Figures(recall, mrr, n, dict(sorted(by_kind.items())))


async def project_document_count(project: str, settings: Settings) -> int:
    """Documents of ``project`` in the status projection (PostgreSQL), any status."""
    from adapters.metadata import Metadata

    async with Metadata(settings.pg_dsn) as metadata:
        return int(await metadata.pool.fetchval(
            "SELECT count(*) FROM documents WHERE project = $1", project))


async def evaluate(questions: list[Question], *, project: str, k: int,
                   settings: Settings) -> list[Outcome]:
    """Run :func:`search.query.search` once per question (sequentially, so latencies
    are per query) and rank each question's evidence in the top ``k`` hits."""
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from search.query import SearchClients, search

    out = []
    vectors = VectorStore(settings.milvus_uri)
    try:
        async with Metadata(settings.pg_dsn) as metadata:
            clients = SearchClients(metadata, vectors)  # open once, as a serving process does
            for q in questions:
                start = time.perf_counter()
                result = await search(q.question, project=project, k=k, settings=settings,
                                      clients=clients)
                ms = (time.perf_counter() - start) * 1000
                out.append(Outcome(q, rank_of(q, result.hits), ms,
                                   [h.get("filename", "") for h in result.hits]))
    finally:
        vectors.close()
    return out
