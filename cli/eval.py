"""``ragstream eval ...``: quality measurements printed as figures.

    ragstream eval tables PDF TRUTH.csv   cell accuracy of recovered tables
    ragstream eval retrieval QUESTIONS.jsonl -p PROJECT [-k 10] [--json]
                                          recall@1/5/10 and MRR of search

``eval tables`` partitions the file with the same stage functions the agents run
(normalize, then partition with the chosen profile/strategy), scores every Table
element against the ground-truth CSV (``stages.table_eval``: merged cells sit in
their top-left grid position, whitespace normalised, exact match), keeps the best
table, prints each mismatching cell and ends with the line
``cell_accuracy=<fraction>``.  A file that cannot be parsed prints
``error: <reason>`` on stderr and exits 1.

``eval retrieval`` runs :func:`search.query.search` for every question of a JSONL
question set against an ingested project and ranks each question's evidence in the
hits (``search.evaluation``: same file name, evidence contained after NFC, case
folding and whitespace collapsing).  It prints one line per question not found in the
top 5 (with where they ranked), the figures per kind, and ends with
``recall@1=… recall@5=… recall@10=… mrr=… ndcg@10=…``.
The corpus question set lives in ``bench/questions/corpus.jsonl``.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Optional

import typer

from stages.profiles import STRATEGIES

eval_app = typer.Typer(help="Quality evaluations (figures printed).", no_args_is_help=True)


@eval_app.command("tables")
def eval_tables_command(
    pdf: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                               help="document holding the table (PDF, or an image)"),
    truth: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                                 help="ground-truth CSV (merged cells: text in the top-left position)"),
    strategy: str = typer.Option("auto", help=f"PDF strategy: {', '.join(STRATEGIES)}"),
    category: str = typer.Option("default", help="profile (category) to use"),
) -> None:
    """Print per-cell diffs of the best-matching recovered table; last line ``cell_accuracy=<fraction>``.

    Inputs: ``pdf`` (any partitionable file), ``truth`` (CSV).  Output (stdout): a
    header line, one ``r<row>c<col>: expected '...' got '...'`` line per mismatch
    (0-based), a summary, then ``cell_accuracy=<fraction>`` with 4 decimals (0 when no
    table was recovered).  Exit status 1 with ``error: <reason>`` on stderr when the
    file cannot be parsed, 2 for a bad option.
    """
    from stages.errors import DocumentError
    from stages.normalize import normalize_file
    from stages.partition import partition_file
    from stages.profiles import get_profile
    from stages.table_eval import best_table, read_truth_csv

    if strategy not in STRATEGIES:
        typer.echo(f"error: unknown strategy {strategy!r} (choose from {', '.join(STRATEGIES)})", err=True)
        raise typer.Exit(code=2)
    profile = get_profile(category).with_strategy(strategy)
    grid = read_truth_csv(truth)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="ragstream-eval-") as tmp:
            norm = normalize_file(pdf, Path(tmp), profile)
            elements = partition_file(norm.path, norm.filetype, profile, filename=pdf.name)
    except DocumentError as exc:
        typer.echo(f"error: {exc.reason}", err=True)
        raise typer.Exit(code=1) from None
    seconds = time.perf_counter() - start
    tables = [e for e in elements if e["type"] == "Table"]
    index, score = best_table(elements, grid)
    typer.echo(f"{pdf.name}: {len(tables)} table(s) recovered in {seconds:.2f} s; "
               f"truth grid {score.truth_shape[0]}x{score.truth_shape[1]}"
               + (f", best table #{index + 1} grid {score.shape[0]}x{score.shape[1]} "
                  f"(page {tables[index]['metadata'].get('page_number')})" if index is not None else ""))
    for r, c, want, got in score.diffs:
        typer.echo(f"r{r}c{c}: expected {want!r} got {got!r}")
    typer.echo(f"{score.correct}/{score.total} cells exact")
    typer.echo(f"cell_accuracy={score.accuracy:.4f}")


def _run_on_project(questions: Path, project: str, job):
    """``job(items, settings)`` (a coroutine) on the question set's items, when the file
    reads and ``project`` has documents; else ``error: …`` on stderr and exit 2."""
    from search.evaluation import QuestionFileError, load_questions, project_document_count
    from streams.settings import get_settings

    try:
        items = load_questions(questions)
    except QuestionFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    settings = get_settings()

    async def run():
        if await project_document_count(project, settings) == 0:
            return None
        return await job(items, settings)

    result = asyncio.run(run())
    if result is None:
        typer.echo(f"error: unknown project {project!r}: it has no documents (ingest them first)", err=True)
        raise typer.Exit(code=2)
    return result


@eval_app.command("retrieval")
def eval_retrieval_command(
    questions: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                                     help="question set, JSON lines {question, file, evidence, kind}"),
    project: str = typer.Option(..., "--project", "-p", help="the ingested project to search"),
    k: int = typer.Option(10, "-k", min=1, max=100, help="hits per search (recall@n for n > k = recall@k)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON line per question (rank, latency, top files)"),
) -> None:
    """Recall of search over a question set; last line
    ``recall@1=… recall@5=… recall@10=… mrr=… ndcg@10=…``.

    Output (stdout): with ``--json`` one JSON object per question (its fields, ``rank``
    1-based or null, ``latency_ms``, ``top_files``), otherwise one line per question not
    found in the top 5 (``miss: <question> | file=<file> | best rank=<r or -> | document
    rank=<first hit from its file, or -> | evidence rank in top 100=<r or ->``); then
    ``kind <kind>: n=<count> recall@1=… recall@5=… recall@10=… mrr=… ndcg@10=…`` per
    kind, a latency line, and the figures (4 decimals) last.  Exit 2 with ``error: …`` on stderr for a bad JSONL
    line (its number is named) or a project without documents.
    """
    from search.evaluation import MISS_DEPTH, evaluate, figures

    outcomes = _run_on_project(questions, project, lambda items, settings: evaluate(
        items, project=project, k=k, settings=settings))
    def shown(rank: Optional[int]) -> str:
        return "-" if rank is None else str(rank)

    for o in outcomes:
        if as_json:
            typer.echo(json.dumps(o.as_json(), ensure_ascii=False))
        elif o.rank is None or o.rank > 5:
            typer.echo(f"miss: {o.question.question} | file={o.question.file} | "
                       f"best rank={shown(o.rank)} | document rank={shown(o.document_rank)} | "
                       f"evidence rank in top {MISS_DEPTH}={shown(o.deep_rank)}")
    result = figures(outcomes)
    for kind, per_kind in result.by_kind.items():
        typer.echo(f"kind {kind}: n={per_kind.n} {per_kind.last_line()}")
    latencies = sorted(o.latency_ms for o in outcomes)
    typer.echo(f"{result.n} questions, project {project}, k={k}; search latency median "
               f"{latencies[len(latencies) // 2]:.0f} ms, max {latencies[-1]:.0f} ms")
    typer.echo(result.last_line())


@eval_app.command("evidence")
def eval_evidence_command(
    questions: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                                     help="question set, JSON lines {question, file, evidence, kind}"),
    project: str = typer.Option(..., "--project", "-p", help="the ingested project holding the documents"),
    as_json: bool = typer.Option(False, "--json", help="one JSON line per question not found in a chunk"),
) -> None:
    """Check a question set before measuring with it: is each question's evidence in a
    chunk of its document at all (search/evidence_check.py; no search is run)?

    Output: per question whose evidence is in no chunk, ``missing: <file>:<line> |
    <evidence> | nearest chunk: <text, 300 chars>`` (``--json``: an object with
    ``line``, ``file``, ``evidence``, ``status``, ``chunks``, ``nearest``), and
    ``no document: …`` for a file with no chunks; last line ``found=… missing=…
    no_document=… of n``.  Exit 1 when any question is not found, 2 for a bad
    question file or a project without documents.
    """
    from search.evidence_check import check_evidence

    verdicts = _run_on_project(questions, project, lambda items, settings: check_evidence(
        items, project=project, settings=settings))
    counts = {"found": 0, "missing": 0, "no-document": 0}
    for v in verdicts:
        counts[v.status] += 1
        where = f"{v.question.file}:{v.question.line}"
        if v.status == "found":
            continue
        if as_json:
            typer.echo(json.dumps({"line": v.question.line, "file": v.question.file,
                                   "evidence": v.question.evidence, "status": v.status,
                                   "chunks": v.chunks, "nearest": v.nearest}, ensure_ascii=False))
        elif v.status == "missing":
            nearest = " ".join((v.nearest or "").split())[:300]
            typer.echo(f"missing: {where} | {v.question.evidence} | nearest chunk: {nearest}")
        else:
            typer.echo(f"no document: {where} | no chunk has file name {v.question.filename!r}")
    typer.echo(f"found={counts['found']} missing={counts['missing']} "
               f"no_document={counts['no-document']} of {len(verdicts)}")
    if counts["found"] != len(verdicts):
        raise typer.Exit(code=1)


if __name__ == "__main__":  # python -m cli.eval PDF TRUTH.csv
    typer.run(eval_tables_command)
