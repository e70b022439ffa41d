"""``ragstream bench idle``: what a user feels on a warm stack with nothing else to do,
and what that stack costs while it waits (issue 26).

1. The dev stack and one ``ragstream worker``; a first document goes through (warm:
   groups joined, models loaded, the project's collection made).
2. ``--docs`` one-page PDFs (born-digital, text salted per document, so nothing comes
   from the embedding cache), uploaded one at a time, each after the previous one was
   found: upload → COMPLETED (status changelog) and upload → **searchable** (the first
   ``ragstream search`` for the document's own salt, hybrid, that returns one of its
   chunks; polled every 0.1 s, each search's own time included).
3. Then nothing: for ``--minutes`` the CPU of every stack service and of the worker's
   process tree is sampled (``bench.cpu.CpuMeter``, every 5 s); the idle stack's cost is
   their sum, in cores.

Last line: ``searchable_p50_s=… searchable_p95_s=… completed_p50_s=… idle_cores=…``.
"""
from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from bench.fairness import FairnessRun
from bench.fairness_docs import StatusTimes, dense_pdf

TERMINAL = {"COMPLETED", "FAILED"}


@dataclass
class IdleRun:
    """Seconds from upload to COMPLETED and to found by search, per document (None:
    not within the timeout), and the idle interval's cores by component."""

    completed_s: list = field(default_factory=list)
    searchable_s: list = field(default_factory=list)
    idle_by_component: dict = field(default_factory=dict)
    idle_seconds: float = 0.0


async def _found(salt: str, document_id: str, project: str, settings, deadline: float) -> bool:
    """Search ``salt`` in ``project`` until a hit of ``document_id`` comes back or
    ``deadline`` (monotonic) passes."""
    from search.query import search

    while time.monotonic() < deadline:
        try:
            result = await search(salt, project=project, k=5, settings=settings, rerank_results=False)
            if any(h.get("document_id") == document_id for h in result.hits):
                return True
        except LookupError:  # no collection yet
            pass
        await asyncio.sleep(0.1)
    return False


async def latency(settings, docs: list[Path], salts: list[str], console: Console,
                  timeout_s: float) -> IdleRun:
    """Step 1's warm-up and step 2 (module docstring) on the running worker."""
    from cli.progress import uploader
    from streams.ingest import delete_document, ingest_file

    run = IdleRun()
    project = f"idle{uuid.uuid4().hex[:6]}"
    times = StatusTimes(settings)
    times.start()
    await asyncio.sleep(2)  # the tail is assigned before the first upload
    async with uploader(settings) as (store, metadata, prod):
        results = []
        for i, (path, salt) in enumerate(zip(docs, salts)):
            t0, m0 = time.time(), time.monotonic()
            r = await ingest_file(path, project=project, category="default", store=store,
                                  metadata=metadata, producer=prod)
            found = await _found(salt, r.document_id, project, settings, m0 + timeout_s)
            searchable = round(time.monotonic() - m0, 2) if found else None
            await times.wait_for(r.document_id, TERMINAL, max(1.0, m0 + timeout_s - time.monotonic()))
            done = times.first.get((r.document_id, "COMPLETED"))
            if i == 0:
                console.print(f"  warm-up {path.name}: searchable after {searchable} s")
            else:
                run.searchable_s.append(searchable)
                run.completed_s.append(round(done - t0, 2) if done is not None else None)
                console.print(f"  {path.name}: COMPLETED after {run.completed_s[-1]} s, "
                              f"searchable after {searchable} s")
            results.append(r)
        for r in results:
            await delete_document(project=project, document_id=r.local_id, bucket=store.bucket,
                                  producer=prod, metadata=metadata)
        for r in results:
            await times.wait_for(r.document_id, {"DELETED"}, 120)
    await times.stop()
    return run


def idle_cpu(settings, worker_pid: int, minutes: float) -> tuple[dict, float]:
    """Step 3: ``({component: cores}, seconds)`` over ``minutes`` of nothing to do."""
    from bench.cpu import CpuMeter, service_pids

    services = service_pids(settings.data_dir)
    meter = CpuMeter({**{name: (lambda pid=pid: [pid]) for name, pid in services.items()},
                      "worker": lambda: [worker_pid]})
    meter.start()
    end = time.monotonic() + minutes * 60
    while time.monotonic() < end:
        time.sleep(min(5.0, max(0.0, end - time.monotonic())))
        meter.poll()
    share = meter.stop()
    return share.by_component, share.seconds


def bench_idle(docs: int, minutes: float, console: Console, timeout_s: float = 120.0) -> IdleRun:
    """Run the three steps (module docstring), print each document, the idle CPU by
    component and the summary line; returns the run."""
    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    settings = get_settings()
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    work = Path(tempfile.mkdtemp(prefix="ragstream-idle-"))
    salts = [f"q{uuid.uuid4().hex[:10]}" for _ in range(docs + 1)]
    paths = [dense_pdf(work / f"page-{i:02d}.pdf", 1, salt) for i, salt in enumerate(salts)]
    worker = start_worker(settings.data_dir / "logs" / "bench-idle.log")
    try:
        run = asyncio.run(latency(settings, paths, salts, console, timeout_s))
        time.sleep(10)  # the deletes' own work settles before the idle sample
        if minutes > 0:
            run.idle_by_component, run.idle_seconds = idle_cpu(settings, worker.pid, minutes)
    finally:
        stop_worker(worker)
    med = lambda vals: statistics.median(v if v is not None else timeout_s for v in vals)  # noqa: E731
    p95 = lambda vals: FairnessRun("idle").p95(vals, timeout_s)  # noqa: E731 (nearest rank; missing = timeout)
    console.print(f"{docs} one-page PDFs one at a time on a warm idle stack: upload→COMPLETED p50 "
                  f"{med(run.completed_s):.2f} s p95 {p95(run.completed_s):.2f} s; upload→searchable p50 "
                  f"{med(run.searchable_s):.2f} s p95 {p95(run.searchable_s):.2f} s", soft_wrap=True)
    idle = sum(run.idle_by_component.values())
    if minutes > 0:
        parts = ", ".join(f"{k} {v:.3f}" for k, v in sorted(run.idle_by_component.items(), key=lambda kv: -kv[1]))
        console.print(f"idle for {run.idle_seconds:.0f} s: {idle:.3f} cores ({parts})", soft_wrap=True)
    console.print(f"searchable_p50_s={med(run.searchable_s):.2f} searchable_p95_s={p95(run.searchable_s):.2f} "
                  f"completed_p50_s={med(run.completed_s):.2f} idle_cores={idle:.3f}", soft_wrap=True)
    return run
