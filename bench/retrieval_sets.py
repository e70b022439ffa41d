"""``ragstream bench retrieval``: retrieval figures over several question sets, each
the median of several fresh ingests (issue 25: "median of three fresh ingests each —
the figures move between ingests").

A set is ``NAME=DOCS:QUESTIONS``: the folder ``DOCS`` is ingested (every file, as
``ragstream ingest DOCS`` would) into a project of its own per round
(``rs-<name>-<round>-<random>``), then ``QUESTIONS`` (JSON lines, see
:mod:`search.evaluation`) is evaluated against it with k = 10.  The usual sets::

    dev=.ragstream-heldout/docs/dev:bench/heldout/dev.jsonl      (tune on this one)
    test=.ragstream-heldout/docs/test:bench/heldout/test.jsonl   (report, never tune)
    corpus=../shared/corpus:bench/questions/corpus.jsonl

It starts the embedded dev stack (if down) and one all-stages worker, like ``bench
e2e``.  Printed per set: each round's last line, the medians of every figure and of
each kind's figures; last line ``<set>_recall@1=… <set>_recall@5=… <set>_mrr=…
<set>_ndcg@10=…`` for every set, in the order given.
"""
from __future__ import annotations

import asyncio
import statistics
import uuid
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from search.evaluation import CUTOFFS, Figures


@dataclass(frozen=True)
class QuestionSet:
    """One ``NAME=DOCS:QUESTIONS`` argument."""

    name: str
    docs: Path
    questions: Path


def parse_set(text: str) -> QuestionSet:
    """``NAME=DOCS:QUESTIONS`` → :class:`QuestionSet`; ValueError naming what is wrong
    (no ``=`` or ``:``, a name that is not ``[a-z0-9-]+``, a folder or file that does
    not exist)."""
    name, eq, rest = text.partition("=")
    docs, colon, questions = rest.rpartition(":")
    if not eq or not colon or not name or not docs or not questions:
        raise ValueError(f"{text!r}: expected NAME=DOCS:QUESTIONS")
    if not all(c.isdigit() or c == "-" or "a" <= c <= "z" for c in name):
        raise ValueError(f"{text!r}: the name must be lower-case letters, digits and '-'")
    found = QuestionSet(name, Path(docs), Path(questions))
    if not found.docs.is_dir():
        raise ValueError(f"{text!r}: {docs} is not a folder")
    if not found.questions.is_file():
        raise ValueError(f"{text!r}: {questions} is not a file")
    return found


def median_figures(rounds: list[Figures]) -> Figures:
    """The median of each figure over ``rounds`` (non-empty), overall and per kind (a
    kind's median over the rounds that have it, which is all of them: one question
    set)."""
    def med(items: list[Figures]) -> Figures:
        return Figures({c: statistics.median(f.recall[c] for f in items) for c in CUTOFFS},
                       statistics.median(f.mrr for f in items),
                       statistics.median(f.ndcg10 for f in items), items[0].n)

    out = med(rounds)
    kinds = sorted({k for f in rounds for k in f.by_kind})
    out.by_kind = {k: med([f.by_kind[k] for f in rounds if k in f.by_kind]) for k in kinds}
    return out


def last_line(results: dict[str, Figures]) -> str:
    """``<set>_recall@1=… <set>_recall@5=… <set>_recall@10=… <set>_mrr=… <set>_ndcg@10=…``
    for every set, 4 decimals."""
    return " ".join(f"{name}_{part}" for name, f in results.items() for part in f.last_line().split())


async def _one_round(qs: QuestionSet, round_no: int, settings, console: Console) -> Figures:
    from cli.progress import ingest_and_follow
    from search.evaluation import evaluate, figures, load_questions

    project = f"rs-{qs.name}-{round_no}-{uuid.uuid4().hex[:6]}"
    outcome = await ingest_and_follow([qs.docs], project=project, category="default",
                                      timeout_s=7200, console=Console(quiet=True), settings=settings)
    failed = outcome.count("FAILED")
    result = figures(await evaluate(load_questions(qs.questions), project=project, k=10,
                                    settings=settings))
    console.print(f"{qs.name} round {round_no}: project {project}, {len(outcome.results)} files "
                  f"({failed} failed): {result.last_line()}")
    return result


def bench_retrieval(sets: list[QuestionSet], rounds: int, console: Console) -> dict[str, Figures]:
    """Ingest and evaluate each set ``rounds`` times; print and return the medians."""
    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    settings = get_settings()
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    worker = start_worker(settings.data_dir / "logs" / "bench-retrieval-worker.log")
    results: dict[str, Figures] = {}
    try:
        for qs in sets:
            per_round = [asyncio.run(_one_round(qs, i + 1, settings, console)) for i in range(rounds)]
            results[qs.name] = median_figures(per_round)
    finally:
        stop_worker(worker)
    for name, f in results.items():
        console.print(f"{name} (median of {rounds}, {f.n} questions): {f.last_line()}")
        for kind, per_kind in f.by_kind.items():
            console.print(f"  {name} kind {kind}: n={per_kind.n} {per_kind.last_line()}")
    print(last_line(results))
    return results
