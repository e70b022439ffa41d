"""``ragstream bench scale``: one long PDF split into page ranges across several
partition workers (each its own process, all in consumer group
``ragstream-partition``), with the peak memory of each partition worker.

Prints the page ranges, which worker partitioned how many, pages/s end to end, and
each partition worker's peak memory: the PSS (proportional set size) of the worker
process plus its parsing pool, summed and sampled every 0.2 s with psutil.  PSS, not
RSS, because the parse processes fork from one preloaded server
(``RAGSTREAM_WARM_PARSERS``) and share its pages: a sum of RSS counts each shared page
once per process (measured: 2,084 MiB of RSS for a worker whose pages fit in far
less), a sum of PSS counts it once.  Last line: ``peak_pss_mb_max=<MiB>``.
"""
from __future__ import annotations

import asyncio
import re
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from rich.console import Console
from streams.app import STAGES

# every stage but partition, which the benchmark runs as its own processes
REST_STAGES = ",".join(s for s in STAGES if s != "partition")


@dataclass
class ScaleResult:
    """What one scale run measured (sizes in MiB, times in seconds)."""

    pages: int
    parts: int = 0
    status: str = ""
    seconds: float = 0.0
    parts_by_worker: Counter = field(default_factory=Counter)
    peak_pss_mb: dict[int, float] = field(default_factory=dict)
    chunks: list[dict] = field(default_factory=list)
    elements: list[dict] = field(default_factory=list)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0


def tree_pss_mb(pid: int) -> float:
    """PSS of process ``pid`` plus all its descendants, in MiB (2**20 bytes): each
    page shared by n processes counts 1/n in each (Linux ``/proc/PID/smaps_rollup``,
    read by psutil's ``memory_full_info``).  A descendant that exits while it is
    read is skipped.  Raises ``psutil.NoSuchProcess`` when ``pid`` itself is gone."""
    root = psutil.Process(pid)
    total = 0
    for proc in [root] + root.children(recursive=True):
        try:
            total += proc.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            if proc is root:
                raise
    return total / 2**20


class MemoryMonitor(threading.Thread):
    """Samples the PSS of each process tree (root + children, :func:`tree_pss_mb`)
    every ``every_s`` seconds until stopped; :meth:`stop` returns the peak per root
    pid in MiB."""

    def __init__(self, pids: list[int], every_s: float = 0.2):
        super().__init__(daemon=True)
        self.pids, self.every_s = pids, every_s
        self.peak: dict[int, float] = {pid: 0.0 for pid in pids}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            for pid in self.pids:
                try:
                    mb = tree_pss_mb(pid)
                except psutil.Error:
                    continue
                self.peak[pid] = max(self.peak[pid], mb)
            self._stop_event.wait(self.every_s)

    def stop(self) -> dict[int, float]:
        self._stop_event.set()
        self.join(5)
        return self.peak


async def _parts(settings, document_id: str) -> list:
    """ElementsReady events of one document, read back from the elements topic."""
    from aiokafka import AIOKafkaConsumer

    from schemas import ElementsReady
    from topics import ELEMENTS

    consumer = AIOKafkaConsumer(ELEMENTS.name, bootstrap_servers=settings.kafka_bootstrap,
                                group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        out = []
        while batches := await consumer.getmany(timeout_ms=1500):
            for msgs in batches.values():
                out += [e for e in (ElementsReady.loads(m.value) for m in msgs)
                        if e.document_id == document_id]
        return out
    finally:
        await consumer.stop()


async def _outputs(settings, project: str, ev, parts) -> tuple[list[dict], list[dict]]:
    """The version's chunks (processed output) and every part's elements."""
    import orjson

    from adapters.object_keys import processed_key
    from adapters.object_store import ObjectStore

    async with ObjectStore(settings) as store:
        body = orjson.loads(await store.get_bytes(processed_key(project, ev.document_id, ev.version)))
        elements = []
        for p in sorted({p.part: p for p in parts}.values(), key=lambda p: p.part):
            elements += orjson.loads(await store.get_bytes(p.elements_key))
    return body["chunks"], elements


def run_scale(settings, env: dict[str, str], *, pages: int = 300, partition_workers: int = 2,
              console: Console | None = None, log_dir: Path | None = None) -> ScaleResult:
    """Run one long PDF through ``partition_workers`` partition processes plus one
    process for the other stages, against the (running) stack ``settings`` names.
    ``env`` is passed to the worker processes (their RAGSTREAM_* settings)."""
    from stages.samples import write_long_pdf
    from devstack.worker_process import start_worker, stop_worker
    from cli.progress import ingest_and_follow

    console = console or Console(quiet=True)
    log_dir = log_dir or settings.data_dir / "logs"
    work = Path(tempfile.mkdtemp(prefix="ragstream-scale-"))
    pdf = write_long_pdf(work / f"long-{pages}p.pdf", pages)
    workers = [start_worker(log_dir / "scale-rest.log", REST_STAGES, env)]
    partitioners = [start_worker(log_dir / f"scale-partition-{i}.log", "partition", env)
                    for i in range(partition_workers)]
    monitor = MemoryMonitor([p.pid for p in partitioners])
    monitor.start()
    result = ScaleResult(pages)
    project = "scale" + str(int(time.time()))
    try:
        time.sleep(8)  # let every partition worker join the group before work arrives
        t0 = time.perf_counter()
        outcome = asyncio.run(ingest_and_follow([pdf], project=project, category="default",
                                                timeout_s=1800, console=console, settings=settings))
        result.seconds = time.perf_counter() - t0
    finally:
        result.peak_pss_mb = monitor.stop()
        for proc in partitioners + workers:
            stop_worker(proc)
    ev = outcome.last.get(outcome.results[0].document_id)
    result.status = ev.status if ev else "TIMEOUT"
    parts = asyncio.run(_parts(settings, outcome.results[0].document_id))
    result.parts = len({p.part for p in parts})
    result.parts_by_worker = Counter(p.worker for p in {p.part: p for p in parts}.values())
    if ev and ev.status == "COMPLETED":
        result.chunks, result.elements = asyncio.run(_outputs(settings, project, ev, parts))
    return result


def page_mismatches(items: list[dict], exact: bool = True) -> list[tuple[int, int]]:
    """(page_number, first page named in the text) pairs that disagree: the long PDF
    prints "printed on page N" on page N.  ``items`` are element dicts (page under
    ``metadata``, ``exact``: the element is on that page) or chunk dicts (a chunk's
    page is its first element's, which may be the previous page's last paragraph)."""
    bad = []
    for item in items:
        page = item["metadata"].get("page_number") if "metadata" in item else item["page_number"]
        named = [int(n) for n in re.findall(r"printed on page (\d+)", item["text"])]
        if named and not (min(named) == page or (not exact and min(named) == page + 1)):
            bad.append((page, min(named)))
    return bad


def bench_scale(pages: int, partition_workers: int, console: Console) -> ScaleResult:
    """Start the stack (default settings) and run :func:`run_scale`, printing figures."""
    import devstack
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    settings = get_settings()
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    res = run_scale(settings, {}, pages=pages, partition_workers=partition_workers, console=console)
    console.print(f"{pages}-page PDF: {res.status} in {res.seconds:.1f} s ({res.pages_per_s:.2f} pages/s), "
                  f"{res.parts} page ranges, {len(res.chunks)} chunks, "
                  f"page-number mismatches: {len(page_mismatches(res.elements))} elements, "
                  f"{len(page_mismatches(res.chunks, exact=False))} chunks")
    for worker, n in sorted(res.parts_by_worker.items()):
        console.print(f"  partition worker {worker}: {n} ranges")
    for pid, mb in res.peak_pss_mb.items():
        console.print(f"  partition worker pid {pid}: peak PSS {mb:.0f} MiB (worker + parsing pool)")
    print(f"peak_pss_mb_max={max(res.peak_pss_mb.values(), default=0):.0f}")
    return res
