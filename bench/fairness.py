"""``ragstream bench fairness``: do small documents wait behind a big one?

One run per mode, each on the running embedded stack with one fresh ``ragstream
worker`` (all stages, default settings but the mode's):

* ``lanes off``: page ranges queued with whole documents on ``partition-tasks``, the
  chunk topics keyed by document id alone and Faust's consumer defaults for the embed
  app (1 MiB fetched per partition, all fetched records per poll, 4096 events
  buffered) — the behaviour before lanes;
* ``lanes on``: the defaults: page ranges on ``page-ranges`` with partition slots of
  their own (agents/partition.py), small documents' chunks on partitions of their own
  (topics/lanes.py), the embed app polling partitions in turn (streams/fair_fetch.py).

In each run a big born-digital PDF (``pages`` pages of dense prose, thousands of
chunks) is uploaded; once it reaches ``start_at`` (EMBEDDING: its chunks are being
embedded; PARTITIONING: its page ranges are being parsed), ``small`` one-page text
documents are uploaded one by one, ``interval_s`` apart.  Each small document's
latency is upload → COMPLETED (status event times, seconds); its wait for the embed
stage is ENHANCING → EMBEDDING.  Then the big document's own upload → COMPLETED is
awaited (what the lanes cost the bulk work), the document deleted and the worker
stopped.  Every document's text is salted per run, so no embedding comes from the
embedding cache.

Last line: ``small_p95_s=<on> small_p95_off_s=<off> embed_wait_p95_s=<on>
embed_wait_p95_off_s=<off>``.  Both modes run in the same invocation on the same
machine (the baseline).  With ``scan_pages``, an image-only PDF of that many pages
(profile ``scanned``: OCR, 10-page ranges) is uploaded just before the big PDF and
deleted with it.  With ``backlog``, each mode's worker then runs the cross-project
part (bench/fairness_projects.py): one project's bulk upload of ``backlog`` documents,
another project's ``singles`` files one by one; the last line adds
``cross_project_p95_s=<on> cross_project_p95_off_s=<off>``.  ``pages`` 0 skips the big
document (only the cross-project part runs).
"""
from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from rich.console import Console

from bench.fairness_docs import StatusTimes, dense_pdf, scanned_pdf, small_docs

__all__ = ["FairnessRun", "SmallDoc", "StatusTimes", "bench_fairness", "dense_pdf", "scanned_pdf",
           "small_docs"]

#: environment of the "lanes off" worker: no lanes, Faust's consumer defaults
LANES_OFF = {"RAGSTREAM_FAIR_SMALL_DOCUMENT_CHUNKS": "0",
             "RAGSTREAM_PAGE_RANGE_LANE": "false",
             "RAGSTREAM_EMBED_FETCH_MAX_BYTES": str(1024 * 1024),
             "RAGSTREAM_EMBED_STREAM_BUFFER": "4096",
             "RAGSTREAM_EMBED_POLL_RECORDS": "100000",
             "RAGSTREAM_FAIR_PROJECT_BURST": "0",
             "RAGSTREAM_TASK_POLL_RECORDS": "100000",
             "RAGSTREAM_TASK_STREAM_BUFFER": "4096"}


@dataclass
class SmallDoc:
    """One small document's times, seconds after its upload (None: not reached)."""

    name: str
    completed_s: Optional[float] = None
    enhancing_s: Optional[float] = None
    embedding_s: Optional[float] = None

    @property
    def embed_wait_s(self) -> Optional[float]:
        """ENHANCING → EMBEDDING: how long its chunks waited for the embed stage."""
        if self.enhancing_s is None or self.embedding_s is None:
            return None
        return self.embedding_s - self.enhancing_s


@dataclass
class FairnessRun:
    """One mode's run: the big document's chunks and each small document's times."""

    mode: str
    big_chunks: int = 0
    big_status_at_end: str = ""
    big_completed_s: Optional[float] = None  # upload → COMPLETED of the big document
    scan_status_at_end: str = ""  # the scan's status once the PDF completed (--scan-pages)
    small: list[SmallDoc] = field(default_factory=list)

    def p95(self, values: list[Optional[float]], timeout_s: float) -> float:
        """95th percentile (nearest rank) of ``values``, a missing one counted as
        ``timeout_s``."""
        vals = sorted(v if v is not None else timeout_s for v in values)
        return vals[max(0, -(-95 * len(vals) // 100) - 1)] if vals else 0.0


async def _run_mode(settings, mode: str, big: Path, smalls: list[Path], console: Console,
                    per_doc_timeout_s: float, interval_s: float, start_at: str,
                    scan: Optional[Path] = None) -> FairnessRun:
    from cli.progress import uploader
    from streams.ingest import delete_document, ingest_file

    run = FairnessRun(mode)
    project = f"fair{mode.replace(' ', '')}{uuid.uuid4().hex[:6]}"
    times = StatusTimes(settings)
    times.start()
    await asyncio.sleep(2)  # the tail is assigned before the first upload
    terminal = {"COMPLETED", "FAILED", "DELETED"}
    async with uploader(settings) as (store, metadata, prod):
        big_t0 = time.time()
        scan_res = None
        if scan is not None:  # OCR page ranges (profile scanned) beside the PDF's
            scan_res = await ingest_file(scan, project=project, category="scanned", store=store,
                                         metadata=metadata, producer=prod)
        res = await ingest_file(big, project=project, category="default", store=store,
                                metadata=metadata, producer=prod)
        reached = await times.wait_for(res.document_id, {start_at} | terminal, 1200)
        ev = times.last.get(res.document_id)
        run.big_chunks = getattr(ev, "chunks_total", 0) if ev else 0
        console.print(f"  ({mode}) big document: {reached or f'no {start_at} in 1200 s'}; "
                      f"small documents every {interval_s:g} s")
        uploads = []
        for i, path in enumerate(smalls):
            if i:
                await asyncio.sleep(interval_s)
            uploads.append((path, time.time(), await ingest_file(
                path, project=project, category="default", store=store, metadata=metadata,
                producer=prod)))
        for path, t0, r in uploads:
            await times.wait_for(r.document_id, terminal, max(1.0, t0 + per_doc_timeout_s - time.time()))
            doc = SmallDoc(path.name)

            def after(status: str) -> Optional[float]:
                at = times.first.get((r.document_id, status))
                return round(at - t0, 2) if at is not None else None

            doc.completed_s, doc.enhancing_s, doc.embedding_s = \
                after("COMPLETED"), after("ENHANCING"), after("EMBEDDING")
            run.small.append(doc)
            wait = f"{doc.embed_wait_s:.1f} s" if doc.embed_wait_s is not None else "-"
            console.print(f"  ({mode}) {path.name}: COMPLETED after {doc.completed_s} s, embed wait {wait}",
                          soft_wrap=True)
        ev = times.last.get(res.document_id)
        run.big_chunks = getattr(ev, "chunks_total", 0) or run.big_chunks
        run.big_status_at_end = getattr(ev, "status", "") if ev else ""
        # the big document's own time: what the lanes cost the bulk work, if anything
        if await times.wait_for(res.document_id, terminal, 900) == "COMPLETED":
            run.big_completed_s = round(times.first[(res.document_id, "COMPLETED")] - big_t0, 1)
            run.big_chunks = getattr(times.last.get(res.document_id), "chunks_total", 0) or run.big_chunks
        if scan_res is not None:
            ev = times.last.get(scan_res.document_id)
            run.scan_status_at_end = getattr(ev, "status", "") if ev else ""
        big_docs = [r for r in (res, scan_res) if r is not None]
        for r in big_docs:
            await delete_document(project=project, document_id=r.document_id.split(".", 1)[1],
                                  bucket=store.bucket, producer=prod, metadata=metadata)
        for r in big_docs:
            await times.wait_for(r.document_id, {"DELETED"}, 600)
    await times.stop()
    return run


def bench_fairness(pages: int, small: int, console: Console, per_doc_timeout_s: float = 300.0,
                   modes: tuple[str, ...] = ("lanes off", "lanes on"), interval_s: float = 5.0,
                   start_at: str = "EMBEDDING", scan_pages: int = 0, backlog: int = 0,
                   singles: int = 5) -> dict[str, FairnessRun]:
    """Start the stack and run every mode (see the module docstring); prints each small
    document's times and the summary line; returns the runs by mode (the big-document
    part's; empty runs when ``pages`` is 0)."""
    from bench.fairness_projects import cross_project, cross_project_inputs

    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    settings = get_settings()
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    work = Path(tempfile.mkdtemp(prefix="ragstream-fairness-"))
    runs: dict[str, FairnessRun] = {}
    cross: dict = {}
    for mode in modes:
        salt = uuid.uuid4().hex[:8]
        env = LANES_OFF if mode == "lanes off" else {}
        worker = start_worker(settings.data_dir / "logs" / f"bench-fairness-{mode.replace(' ', '-')}.log",
                              env=env)
        try:
            if pages:
                big = dense_pdf(work / f"report-{salt}.pdf", pages, salt)
                scan = scanned_pdf(dense_pdf(work / f"scan-source-{salt}.pdf", min(scan_pages, 50),
                                             salt + "s"), work / f"scan-{salt}.pdf", scan_pages) \
                    if scan_pages else None
                runs[mode] = asyncio.run(_run_mode(settings, mode, big, small_docs(work / salt, small, salt),
                                                   console, per_doc_timeout_s, interval_s, start_at, scan))
            if backlog:
                pdfs, solo = cross_project_inputs(work, backlog, singles)
                cross[mode] = asyncio.run(cross_project(
                    settings, mode, pdfs, solo, console, interval_s, per_doc_timeout_s,
                    burst=0 if mode == "lanes off" else None))
        finally:
            stop_worker(worker)
    figures = {}
    for mode, run in runs.items():
        done = [d.completed_s for d in run.small]
        waits = [d.embed_wait_s for d in run.small]
        figures[mode] = (run.p95(done, per_doc_timeout_s), run.p95(waits, per_doc_timeout_s))
        med = statistics.median(v if v is not None else per_doc_timeout_s for v in done) if done else 0
        console.print(f"{mode}: big document {run.big_chunks} chunks (at {run.big_status_at_end} when the "
                      f"last small one was done; its own upload→COMPLETED {run.big_completed_s} s"
                      + (f"; the scan at {run.scan_status_at_end} then" if scan_pages else "") + "); "
                      f"{len(done)} small documents, upload→COMPLETED "
                      f"p50 {med:.1f} s p95 {figures[mode][0]:.1f} s; embed wait p95 {figures[mode][1]:.1f} s",
                      soft_wrap=True)
    on, off = figures.get("lanes on", (0.0, 0.0)), figures.get("lanes off", (0.0, 0.0))
    last = (f"small_p95_s={on[0]:.1f} small_p95_off_s={off[0]:.1f} "
            f"embed_wait_p95_s={on[1]:.1f} embed_wait_p95_off_s={off[1]:.1f}") if runs else ""
    if cross:
        p95 = {mode: FairnessRun(mode).p95(c.single_s, per_doc_timeout_s) for mode, c in cross.items()}
        for mode, c in cross.items():
            med = statistics.median(v if v is not None else per_doc_timeout_s for v in c.single_s)
            console.print(f"{mode}: a second project's {len(c.single_s)} files while the first's {backlog} "
                          f"documents drain: upload→COMPLETED p50 {med:.1f} s p95 {p95[mode]:.1f} s; the "
                          f"backlog uploaded in {c.backlog_upload_s} s, drained after {c.backlog_drained_s} s "
                          f"({c.backlog_failed} not COMPLETED)", soft_wrap=True)
        last += (f" cross_project_p95_s={p95.get('lanes on', 0.0):.1f}"
                 f" cross_project_p95_off_s={p95.get('lanes off', 0.0):.1f}")
    console.print(last.strip(), soft_wrap=True)
    return runs
