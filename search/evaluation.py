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
1/rank (0 when not found) over the top k; ``ndcg@10`` = mean of 1/log2(1 + rank) for
ranks ≤ 10 (one relevant chunk per question, so the ideal DCG is 1). Hits beyond k
are never seen, so recall@n for n > k equals recall@k.  Each figure is also given per
kind.  A miss (not in the top 5) carries two diagnostics: ``document_rank``, the rank
of the first hit from the right document at all (ranking within the document lost it
when this is small), and ``deep_rank``, the evidence's rank in a deeper search
(:data:`MISS_DEPTH` hits; e.g. "ranks 62nd").
"""
from __future__ import annotations

import json
import math
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Optional

from streams.settings import Settings

FIELDS = ("question", "file", "evidence", "kind")
CUTOFFS = (1, 5, 10)
MISS_DEPTH = 100  # hits a miss is searched again with, to say where its evidence ranks


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
    search's wall time (ms), the top hits' file names (for a failure's context) and,
    for a miss, ``document_rank`` (first hit from the question's file in the top
    ``k``, or None) and ``deep_rank`` (the evidence's rank within :data:`MISS_DEPTH`
    hits, or None)."""

    question: Question
    rank: Optional[int]
    latency_ms: float
    top_files: list[str] = field(default_factory=list)
    document_rank: Optional[int] = None
    deep_rank: Optional[int] = None

    def as_json(self) -> dict[str, Any]:
        """One JSON-able record: question fields, rank, latency_ms, top_files,
        document_rank, deep_rank."""
        q = asdict(self.question)
        q.pop("line")
        return {**q, "rank": self.rank, "latency_ms": round(self.latency_ms, 1),
                "top_files": self.top_files, "document_rank": self.document_rank,
                "deep_rank": self.deep_rank}


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


def first_file_rank(question: Question, hits: Iterable[dict[str, Any]]) -> Optional[int]:
    """The 1-based rank of the first hit from the question's file, or None."""
    return next((rank for rank, hit in enumerate(hits, 1)
                 if hit.get("filename") == question.filename), None)


@dataclass
class Figures:
    """``recall`` {n: share found at rank ≤ n} for n in :data:`CUTOFFS`, ``mrr``,
    ``ndcg10`` and the question count ``n`` of a set of outcomes, and ``by_kind``
    {kind: the same figures over that kind's questions} (empty inside a kind)."""

    recall: dict[int, float]
    mrr: float
    ndcg10: float
    n: int
    by_kind: dict[str, "Figures"] = field(default_factory=dict)

    def last_line(self) -> str:
        """``recall@1=… recall@5=… recall@10=… mrr=… ndcg@10=…`` with 4 decimals."""
        return " ".join([*(f"recall@{c}={self.recall[c]:.4f}" for c in CUTOFFS),
                         f"mrr={self.mrr:.4f}", f"ndcg@10={self.ndcg10:.4f}"])


def _figures(ranks: list[Optional[int]]) -> Figures:
    n = len(ranks)
    recall = {c: sum(r is not None and r <= c for r in ranks) / n for c in CUTOFFS}
    mrr = sum(1.0 / r for r in ranks if r is not None) / n
    ndcg10 = sum(1.0 / math.log2(1 + r) for r in ranks if r is not None and r <= 10) / n
    return Figures(recall, mrr, ndcg10, n)


def figures(outcomes: list[Outcome]) -> Figures:
    """Recall at each cutoff, MRR and nDCG@10 of ``outcomes`` (non-empty), overall and
    per kind (kinds sorted by name)."""
    result = _figures([o.rank for o in outcomes])
    kinds = sorted({o.question.kind for o in outcomes})
    result.by_kind = {kind: _figures([o.rank for o in outcomes if o.question.kind == kind])
                      for kind in kinds}
    return result


async def project_document_count(project: str, settings: Settings) -> int:
    """Documents of ``project`` in the status projection (PostgreSQL), any status."""
    from adapters.metadata import Metadata

    async with Metadata(settings.pg_dsn) as metadata:
        return int(await metadata.pool.fetchval(
            "SELECT count(*) FROM documents WHERE project = $1", project))


async def evaluate(questions: list[Question], *, project: str, k: int,
                   settings: Settings) -> list[Outcome]:
    """Run :func:`search.query.search` once per question (sequentially, so latencies
    are per query) and rank each question's evidence in the top ``k`` hits; a miss
    (not in the top 5) is searched again with :data:`MISS_DEPTH` hits for its
    ``deep_rank`` (that second search is not in the latency)."""
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
                outcome = Outcome(q, rank_of(q, result.hits), ms,
                                  [h.get("filename", "") for h in result.hits])
                if outcome.rank is None or outcome.rank > 5:  # a miss: where did it go?
                    outcome.document_rank = first_file_rank(q, result.hits)
                    deep = await search(q.question, project=project, k=max(k, MISS_DEPTH),
                                        settings=settings, clients=clients)
                    outcome.deep_rank = rank_of(q, deep.hits)
                out.append(outcome)
    finally:
        vectors.close()
    return out
