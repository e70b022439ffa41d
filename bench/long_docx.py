"""``ragstream bench long-docx``: a long DOCX parsed whole, in parts, and as a PDF in page ranges.

Builds a DOCX of ``--pages`` pages with tables (``bench.long_documents.long_docx``:
prose from the README, a 3×3 table every 4 pages, a section every 50 pages), then
times, on the same machine in the same run, with ``--busy`` processes spinning on the
CPU beside it (the "busy machine" of issue 24):

1. ``whole``: ``partition_file`` on the whole DOCX in one process (what one partition
   task did before documents other than PDFs were split; capped at ``--cap`` seconds);
2. ``parts``: normalize's unit ranges (``stages.document_parts``, the default
   profile's budget) partitioned by ``--workers`` processes at once, as that many
   partition workers share a document's tasks;
3. ``pdf``: the same DOCX converted to PDF by LibreOffice (``stages.office``, the
   sandboxed cold path) and its page ranges (``max_pages_per_task``) partitioned by
   ``--workers`` processes: the wall time the PDF route takes.

Each line: wall seconds, parts, elements, the longest single task (what a per-task
timeout meets).  Last line: ``parts_s=<x> pdf_s=<y> whole_s=<z> parts_vs_pdf=<x/y>``.
"""
from __future__ import annotations

import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Optional

from rich.console import Console


def _spin() -> None:  # pragma: no cover - runs in a child until terminated
    while True:
        pass


def _partition_task(path: str, filetype: str, pages: Optional[tuple[int, int]]) -> tuple[int, float]:
    from stages.partition import partition_file
    from stages.profiles import get_profile

    started = time.monotonic()
    try:
        n = len(partition_file(Path(path), filetype, get_profile("default"), pages))
    except Exception as exc:  # noqa: BLE001 - a bench reports, it does not stop
        if type(exc).__name__ != "EmptyDocument":
            raise
        n = 0
    return n, time.monotonic() - started


def _run_tasks(path: Path, filetype: str, ranges: list, workers: int) -> tuple[float, int, float]:
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        results = list(ex.map(_partition_task, [str(path)] * len(ranges), [filetype] * len(ranges), ranges))
    return time.monotonic() - started, sum(n for n, _ in results), max(s for _, s in results)


def bench_long_docx(pages: int, workers: int, busy: int, cap_s: float, console: Console,
                    out_dir: Optional[Path] = None, corpus: Optional[Path] = None) -> dict[str, float]:
    """Run the three ways (module docstring) and print a table; returns
    ``{"whole_s", "parts_s", "pdf_s"}`` (wall seconds; ``whole_s`` is ``cap_s`` when it
    ran past the cap, ``pdf_s`` is 0 when the conversion failed).  ``corpus``: a folder
    of real PDF/DOCX files whose text is the prose (default: the README's)."""
    from bench.long_documents import corpus_text, long_docx, use_text

    if corpus is not None:
        console.print(f"prose from {corpus}: {use_text(corpus_text(corpus)):,} words")
    from stages import document_parts
    from stages.normalize import inspect_pdf, page_ranges
    from stages.office import convert_to_pdf
    from stages.profiles import get_profile

    profile = get_profile("default")
    work = out_dir or Path(tempfile.mkdtemp(prefix="ragstream-bench-long-docx-"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    path = long_docx(work / f"long-{pages}.docx", pages, per_page=8, sections_every=50)
    console.print(f"built {path.name}: {pages} pages, {path.stat().st_size:,} bytes in {time.monotonic() - t:.1f} s")
    spinners = [multiprocessing.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(busy)]
    for p in spinners:
        p.start()
    rows: list[tuple[str, float, int, int, float]] = []
    try:
        ranges = document_parts.part_ranges(path, "docx", profile.max_pages_per_task * document_parts.CHARS_PER_PAGE)
        wall, n, longest = _run_tasks(path, "docx", ranges, workers)
        rows.append(("parts", wall, len(ranges), n, longest))
        t = time.monotonic()
        pdf_s = 0.0
        try:
            pdf = convert_to_pdf(path, work / "pdf", "docx", profile.timeout_s)
            convert_s = time.monotonic() - t
            pdf, count, _ = inspect_pdf(pdf, work / "pdf")
            pdf_ranges = page_ranges(count, profile.max_pages_per_task)
            wall, n, longest = _run_tasks(pdf, "pdf", pdf_ranges, workers)
            pdf_s = convert_s + wall
            rows.append((f"pdf ({count} pages; conversion {convert_s:.0f} s)", pdf_s, len(pdf_ranges), n, longest))
        except Exception as exc:  # noqa: BLE001 - e.g. no LibreOffice or no sandbox here
            console.print(f"pdf route not measured: {type(exc).__name__}: {exc}")
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as ex:
            future = ex.submit(_partition_task, str(path), "docx", None)
            try:
                n, wall = future.result(timeout=cap_s)
                rows.append(("whole", wall, 1, n, wall))
            except TimeoutError:
                for proc in list(getattr(ex, "_processes", {}).values()):
                    proc.kill()
                rows.append((f"whole (over the {cap_s:g} s cap)", cap_s, 1, 0, cap_s))
    finally:
        for p in spinners:
            p.terminate()
    from rich.table import Table

    table = Table(title=f"{pages}-page DOCX, {workers} parse processes, {busy} busy spinners")
    for col in ("way", "wall s", "tasks", "elements", "longest task s"):
        table.add_column(col, justify="left" if col == "way" else "right")
    for way, wall, tasks, n, longest in rows:
        table.add_row(way, f"{wall:.1f}", str(tasks), f"{n:,}", f"{longest:.1f}")
    console.print(table)
    figures = {"parts_s": rows[0][1], "pdf_s": pdf_s, "whole_s": rows[-1][1]}
    ratio = f"{figures['parts_s'] / pdf_s:.2f}" if pdf_s else "n/a"
    console.print(f"parts_s={figures['parts_s']:.1f} pdf_s={pdf_s:.1f} whole_s={figures['whole_s']:.1f} "
                  f"parts_vs_pdf={ratio}")
    return figures
