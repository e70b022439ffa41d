"""The cross-project part of ``ragstream bench fairness``: does one project's bulk
upload make another project's single file wait?

On the mode's worker (bench/fairness.py starts it; lanes off or on), once a first
file has gone through (the worker is warm), project A
uploads ``backlog`` small PDFs (two pages of prose each), eight at a time — a bulk
upload — and right after it project B uploads ``singles`` one-page text
files one by one, ``interval_s`` apart.  Each of B's files is timed upload →
COMPLETED (status event times, seconds); A's backlog is timed from its first upload
to its last document's COMPLETED (what the project lanes cost the bulk work).  Then
every document of both projects is deleted and the deletes awaited, so the next
mode's worker starts on quiet topics.

With lanes off (``fair_project_burst`` 0 for the uploader and the worker, Faust's
consumer defaults) B's files queue behind A's backlog on every topic; with lanes on,
A's uploads after its first ``fair_project_burst`` go to the bulk lane
(topics/lanes.py ``burst_lane``), and B's stay in the other half of every topic.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from rich.console import Console

from bench.fairness_docs import StatusTimes, dense_pdf, small_docs

TERMINAL = {"COMPLETED", "FAILED", "DELETED"}
#: project A's uploads in flight at once: a bulk upload, as a client's parallel requests
UPLOADERS = 8


@dataclass
class CrossProjectRun:
    """One mode's cross-project figures, seconds (None: not reached in time)."""

    mode: str
    single_s: list[Optional[float]] = field(default_factory=list)  # B's files, upload → COMPLETED
    backlog_upload_s: float = 0.0  # A's uploads, first to last
    backlog_drained_s: Optional[float] = None  # A's first upload → its last COMPLETED
    backlog_failed: int = 0


def backlog_pdfs(folder: Path, n: int, salt: str) -> list[Path]:
    """``n`` two-page born-digital PDFs of prose (bench/fairness_docs.py ``dense_pdf``),
    text unique to ``salt`` and to each file."""
    folder.mkdir(parents=True, exist_ok=True)
    return [dense_pdf(folder / f"bulk-{i:03d}.pdf", 2, f"{salt}-{i}") for i in range(n)]


async def cross_project(settings, mode: str, backlog: list[Path], singles: list[Path],
                        console: Console, interval_s: float, per_doc_timeout_s: float,
                        burst: Optional[int]) -> CrossProjectRun:
    """Project A's bulk upload of ``backlog``, then project B's ``singles`` one by one
    (see the module docstring); ``burst``: the uploader's project-lane threshold
    (0: off, as the lanes-off worker; None: the setting)."""
    from cli.progress import uploader
    from streams.ingest import delete_document, ingest_file

    run = CrossProjectRun(mode)
    tag = uuid.uuid4().hex[:6]
    bulk_project, solo_project = f"bulk{tag}", f"solo{tag}"
    times = StatusTimes(settings)
    times.start()
    await asyncio.sleep(2)  # the tail is assigned before the first upload
    async with uploader(settings) as (store, metadata, prod):
        # the worker is warm (groups joined, models loaded) before anything is timed
        warm = await ingest_file(singles[0], project=f"warm{tag}", category="default", store=store,
                                 metadata=metadata, producer=prod, burst=burst)
        await times.wait_for(warm.document_id, TERMINAL, 300)
        t0 = time.time()
        slots = asyncio.Semaphore(UPLOADERS)

        async def upload(path: Path):
            async with slots:
                return await ingest_file(path, project=bulk_project, category="default", store=store,
                                         metadata=metadata, producer=prod, burst=burst)

        bulk = list(await asyncio.gather(*(upload(p) for p in backlog)))
        run.backlog_upload_s = round(time.time() - t0, 1)
        console.print(f"  ({mode}) project {bulk_project}: {len(bulk)} documents uploaded in "
                      f"{run.backlog_upload_s} s; project {solo_project}: a file every {interval_s:g} s",
                      soft_wrap=True)
        solo = []
        for i, path in enumerate(singles):
            if i:
                await asyncio.sleep(interval_s)
            solo.append((time.time(), await ingest_file(
                path, project=solo_project, category="default", store=store, metadata=metadata,
                producer=prod, burst=burst)))
        for (at, r), path in zip(solo, singles):
            end = await times.wait_for(r.document_id, TERMINAL, max(1.0, at + per_doc_timeout_s - time.time()))
            done = times.first.get((r.document_id, "COMPLETED"))
            run.single_s.append(round(done - at, 2) if done is not None else None)
            console.print(f"  ({mode}) {solo_project}/{path.name}: "
                          + (f"COMPLETED after {run.single_s[-1]} s" if done is not None
                             else f"not COMPLETED ({end or 'no outcome'} after {per_doc_timeout_s:g} s)"),
                          soft_wrap=True)
        ends = [await times.wait_for(r.document_id, TERMINAL, max(1.0, t0 + 1800 - time.time()))
                for r in bulk]
        run.backlog_failed = sum(1 for e in ends if e != "COMPLETED")
        finished = [times.first.get((r.document_id, e)) for r, e in zip(bulk, ends) if e]
        if len(finished) == len(bulk):
            run.backlog_drained_s = round(max(finished) - t0, 1)
        for project, results in ((bulk_project, bulk), (solo_project, [r for _, r in solo])):
            for r in results:
                await delete_document(project=project, document_id=r.local_id, bucket=store.bucket,
                                      producer=prod, metadata=metadata)
        await delete_document(project=f"warm{tag}", document_id=warm.local_id, bucket=store.bucket,
                              producer=prod, metadata=metadata)
        for r in bulk + [r for _, r in solo] + [warm]:
            await times.wait_for(r.document_id, {"DELETED"}, max(1.0, t0 + 2400 - time.time()))
    await times.stop()
    return run


def cross_project_inputs(work: Path, backlog: int, singles: int) -> tuple[list[Path], list[Path]]:
    """A mode's files, salted afresh (no embedding from the cache): ``backlog`` PDFs
    for project A and ``singles`` text files for project B."""
    salt = uuid.uuid4().hex[:8]
    return (backlog_pdfs(work / f"bulk-{salt}", backlog, salt),
            small_docs(work / f"solo-{salt}", singles, salt + "-solo"))
