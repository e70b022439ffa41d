"""``ragstream bench ...``: benchmarks that print figures, each compared against a
baseline measured in the same run."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

bench_app = typer.Typer(help="Benchmarks (figures printed; baseline in the same run).",
                        no_args_is_help=True)


@bench_app.command("e2e")
def e2e(corpus: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                              help="folder of documents (default: generated samples)"),
        keep_running: bool = typer.Option(False, help="leave the stack up afterwards")) -> None:
    """Pipeline pages/s and chunks/s vs the same stage functions in a plain loop."""
    from bench.e2e import bench_e2e

    bench_e2e(corpus, Console(), keep_running=keep_running)


@bench_app.command("peer")
def peer(corpus: Path = typer.Option(..., exists=True, file_okay=False, help="folder of documents"),
         peer_script: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                                    help="the peer script (default: RAGSTREAM_PEER_SCRIPT, "
                                                         "else ../shared/peers/unstructured_ingest.sh)"),
         peer_output: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                                    help="read the peer's recorded stdout instead of running it"),
         out: Optional[Path] = typer.Option(None, file_okay=False, help="work folder (default: a new temp folder)"),
         keep_running: bool = typer.Option(False, help="leave the stack up afterwards"),
         runs: int = typer.Option(1, min=1, help="runs per side; the best of each is compared"),
         same_work: bool = typer.Option(True, help="also run ragstream with the 'basic' profile (the peer's "
                                                    "work: no tables/images, 3,000-character chunks)")) -> None:
    """unstructured-ingest and ragstream on the same files: pages, chunks, empty and failed
    files, pages/s per side, characters embedded per second, per-stage profile; last line
    vs_unstructured_ingest=<ratio> same_work_ratio=<ratio> (bench/same_work.py)."""
    from bench.peer import bench_peer

    try:
        bench_peer(corpus, Console(width=160), script=peer_script, peer_output=peer_output,
                   keep_running=keep_running, out_dir=out, runs=runs, same_work=same_work)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None


@bench_app.command("hostile")
def hostile(cases: Path = typer.Option(..., exists=True, file_okay=False,
                                       help="folder of files (optional expected.json)"),
            timeout: float = typer.Option(600.0, help="seconds per file to its terminal status"),
            max_rss_mb: float = typer.Option(6144.0, help="kill a parse process over this RSS"),
            keep_running: bool = typer.Option(False, help="leave the stack up afterwards"),
            expected: Path = typer.Option(None, exists=True, dir_okay=False,
                                          help="expectations JSON (default: CASES/expected.json; "
                                               "bench/hostile_expected.json holds ../shared/cases')")
            ) -> None:
    """Each file through the full pipeline: status, code, seconds, peak parse RSS, chunks;
    last line hostile_ok=<n>/<m> max_rss_mb=<x>."""
    from bench.hostile import bench_hostile

    try:
        bench_hostile(cases, Console(width=160), timeout_s=timeout, max_rss_mb=max_rss_mb,
                      keep_running=keep_running, expected_path=expected)
    except (ValueError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None


@bench_app.command("scale")
def scale(pages: int = typer.Option(300, help="pages in the generated PDF"),
          workers: int = typer.Option(2, help="partition worker processes"),
          autoscale: bool = typer.Option(False, "--autoscale",
                                         help="instead: an embed backlog drained by 1 consumer, then "
                                              "by `worker --autoscale` (docs/s, consumers over time)"),
          docs: int = typer.Option(40, help="--autoscale: small text documents per run"),
          target_s: float = typer.Option(5.0, help="--autoscale: target seconds of backlog")) -> None:
    """A long PDF in page ranges across partition workers: pages/s and peak RSS each;
    or, with --autoscale, docs/s with and without lag-driven embed consumers."""
    if autoscale:
        from bench.autoscale import bench_autoscale

        bench_autoscale(docs, Console(), target_s=target_s)
        return
    from bench.scale import bench_scale

    bench_scale(pages, workers, Console())


@bench_app.command("fairness")
def fairness(pages: int = typer.Option(400, min=0, help="pages of the big born-digital PDF (0: skip it, "
                                        "only the cross-project part)"),
             small: int = typer.Option(10, min=1, help="one-page documents uploaded one by one"),
             timeout: float = typer.Option(300.0, help="seconds allowed to each small document"),
             interval: float = typer.Option(5.0, min=0.0, help="seconds between two small uploads"),
             scan_pages: int = typer.Option(0, min=0, help="also a scanned (image-only) PDF of this many "
                                            "pages, OCRed beside the big PDF"),
             start: str = typer.Option("EMBEDDING", help="the big document's status at the first small "
                                       "upload: EMBEDDING or PARTITIONING"),
             backlog: int = typer.Option(200, min=0, help="then one project uploads this many documents "
                                         "at once and a second project single files (0: skip)"),
             singles: int = typer.Option(5, min=1, help="the second project's files, one by one"),
             only_on: bool = typer.Option(False, "--only-on", help="skip the lanes-off baseline run")) -> None:
    """Small documents uploaded while a big PDF is parsed (--start PARTITIONING) or its
    chunks embedded (EMBEDDING), then a second project's files while a first project's
    --backlog drains; lanes off then on; starts the dev stack (stop it with `ragstream dev
    down`); last line small_p95_s=<on> small_p95_off_s=<off> embed_wait_p95_s=…
    cross_project_p95_s=<on> cross_project_p95_off_s=<off>."""
    from bench.fairness import bench_fairness

    if start not in ("EMBEDDING", "PARTITIONING"):
        typer.echo(f"error: --start must be EMBEDDING or PARTITIONING, not {start!r}", err=True)
        raise typer.Exit(code=2)
    modes = ("lanes on",) if only_on else ("lanes off", "lanes on")
    bench_fairness(pages, small, Console(width=160), per_doc_timeout_s=timeout, modes=modes,
                   interval_s=interval, start_at=start, scan_pages=scan_pages, backlog=backlog,
                   singles=singles)


@bench_app.command("idle")
def idle(docs: int = typer.Option(10, min=1, help="one-page PDFs, uploaded one at a time"),
         minutes: float = typer.Option(10.0, min=0.0, help="then sample the idle stack's CPU this long "
                                       "(0: skip)"),
         timeout: float = typer.Option(120.0, help="seconds allowed to each document")) -> None:
    """A warm, otherwise idle stack: each one-page PDF's upload → COMPLETED and upload →
    found by search, then the idle stack's CPU; starts the dev stack (stop it with
    `ragstream dev down`); last line searchable_p50_s=… searchable_p95_s=…
    completed_p50_s=… idle_cores=…."""
    from bench.idle import bench_idle

    bench_idle(docs, minutes, Console(width=160), timeout_s=timeout)


@bench_app.command("long-docx")
def long_docx(pages: int = typer.Option(800, help="pages in the generated DOCX"),
              workers: int = typer.Option(2, help="parse processes at once (partition workers)"),
              busy: int = typer.Option(2, help="processes spinning on the CPU beside it"),
              cap: float = typer.Option(600.0, help="seconds allowed to the whole-document parse"),
              corpus: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                                    help="real PDF/DOCX files whose text fills the pages "
                                                         "(e.g. ../shared/corpus; default: the README)"),
              out: Optional[Path] = typer.Option(None, file_okay=False,
                                                 help="keep the built DOCX here")) -> None:
    """A long DOCX parsed whole, in parts (stages.document_parts) and as a PDF in page
    ranges, on a busy machine; last line parts_s=<x> pdf_s=<y> whole_s=<z> parts_vs_pdf=<r>."""
    from bench.long_docx import bench_long_docx

    bench_long_docx(pages, workers, busy, cap, Console(width=160), out_dir=out, corpus=corpus)


@bench_app.command("embed")
def embed(repeats: int = typer.Option(2, help="runs per case (best is kept)")) -> None:
    """Chunks/s through Triton vs in-process ONNX Runtime (batch 64/256, 50/300 tokens)."""
    from bench.embed import bench_embed

    bench_embed(repeats=repeats)


@bench_app.command("int8")
def int8(repeats: int = typer.Option(3, help="runs per case (best is kept)"),
         threads: int = typer.Option(0, help="ONNX Runtime intra-op threads (0: one per core)")) -> None:
    """Chunks/s of the int8 embedder vs the float one in process, and their vectors' cosine."""
    from bench.int8 import bench_int8

    bench_int8(repeats=repeats, threads=threads)


@bench_app.command("spinning")
def spinning(repeats: int = typer.Option(2, help="runs per setting (best is kept)"),
             batches: int = typer.Option(20, help="batches in the stream"),
             batch_size: int = typer.Option(4, help="texts per batch"),
             gap_ms: float = typer.Option(50.0, help="pause between batches (ms)")) -> None:
    """CPU seconds of an ONNX Runtime embed stream with spinning threads on vs off."""
    from bench.ort_spinning import bench_spinning

    bench_spinning(repeats=repeats, batches=batches, batch_size=batch_size, gap_ms=gap_ms)


@bench_app.command("parse")
def parse(corpus: Path = typer.Option(..., exists=True, file_okay=False, help="folder of documents"),
          strategies: str = typer.Option("fast,ocr_only,hi_res,auto", help="comma-separated strategies"),
          pdf_only: bool = typer.Option(False, "--pdf-only", help="only *.pdf files"),
          detail: bool = typer.Option(False, "--detail", help="one line per file and strategy")) -> None:
    """Pages/s of each partition strategy (fast, ocr_only, hi_res, auto) on CORPUS, same run."""
    from bench.parse import bench_parse

    try:
        bench_parse(corpus, Console(width=160), [s.strip() for s in strategies.split(",") if s.strip()],
                    pdf_only=pdf_only, detail=detail)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None


@bench_app.command("search")
def search(chunks: int = typer.Option(100_000, help="synthetic chunks inserted into a scratch project"),
           queries: int = typer.Option(50, help="timed searches of each kind"),
           window: int = typer.Option(20, help="candidates per search (20: a k=5 search)"),
           flush: bool = typer.Option(True, help="seal the rows into segments before timing")) -> None:
    """p50/p95 latency of hybrid (dense + BM25, RRF) vs dense-only search, same collection, same run."""
    from bench.search import bench_search

    bench_search(chunks, Console(), queries=queries, window=window, flush=flush)


@bench_app.command("retrieval")
def retrieval(sets: list[str] = typer.Option(..., "--set", help="NAME=DOCS:QUESTIONS (repeatable), "
                                                               "e.g. dev=.ragstream-heldout/docs/dev:"
                                                               "bench/heldout/dev.jsonl"),
              rounds: int = typer.Option(3, min=1, max=9, help="fresh ingests per set (median reported)")) -> None:
    """Retrieval figures per question set, each the median of ``rounds`` fresh ingests;
    last line ``<set>_recall@1=… … <set>_ndcg@10=…``."""
    from bench.retrieval_sets import bench_retrieval, parse_set

    try:
        parsed = [parse_set(s) for s in sets]
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    bench_retrieval(parsed, rounds, Console())
