"""``ragstream bench scale --autoscale``: a backlog of small text documents waiting
for the embed stage, drained by one embed consumer, then (same run, a fresh backlog)
by ``ragstream worker --autoscale --stages embed``.

Each run: every other stage runs in one worker; the documents are uploaded and
pushed through normalize..enhance while no embed consumer runs, so they pile up on
``ragstream.enhanced-chunks``; then the embed worker starts and the clock runs
until every document is COMPLETED.  Prints docs/s of both runs, their ratio, and
the number of embed consumer processes over time (sampled every second, until the
autoscaled stage is back at its minimum or ``idle_wait_s`` passed).

The embed consumers embed one chunk per Triton call (``RAGSTREAM_EMBED_MAX_BATCH=1``
unless ``embed_batch`` says otherwise): with batching, one consumer drains a small
backlog in one call and there is nothing to scale.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import psutil
from rich.console import Console

from bench.cpu import CpuMeter, CpuShare, service_pids
from bench.e2e import embed_cache_rows
from streams.app import STAGES

UPSTREAM = ("normalize", "partition", "chunk", "enhance")
NOT_EMBED = ",".join(s for s in STAGES if s != "embed")


@dataclass
class DrainRun:
    """One drain: ``docs`` documents, ``backlog`` messages waiting for embed at the
    start, ``seconds`` until all COMPLETED, consumer counts over time ``(s, n)``."""

    autoscale: bool
    docs: int
    backlog: int = 0
    seconds: float = 0.0
    completed: int = 0
    consumers: list[tuple[float, int]] = field(default_factory=list)
    fell_back_after_s: Optional[float] = None
    cpu: Optional[CpuShare] = None  # during the drain (start of embed to all COMPLETED)

    @property
    def docs_per_s(self) -> float:
        return self.completed / self.seconds if self.seconds else 0.0

    @property
    def max_consumers(self) -> int:
        return max((n for _, n in self.consumers), default=0)


def write_docs(out_dir: Path, n: int, paragraphs: int = 6) -> list[Path]:
    """``n`` small distinct text documents (a few chunks each)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        body = "\n\n".join(
            f"Section {j} of note {i}. " + " ".join(
                f"Pump {i}-{j} line {k} reports flow {(i * 31 + j * 7 + k) % 97} litres per minute "
                f"and pressure {(i + j + k) % 13} bar." for k in range(12))
            for j in range(paragraphs))
        p = out_dir / f"note-{i:03d}.txt"
        p.write_text(f"Maintenance note {i}\n\n{body}\n")
        paths.append(p)
    return paths


def _embed_consumers(proc: subprocess.Popen) -> int:
    """Embed consumer processes under ``proc``: itself when it runs the stage alone,
    else its ``worker --stages embed`` children."""
    try:
        root = psutil.Process(proc.pid)
        kids = [c for c in root.children() if "worker" in " ".join(c.cmdline())]
        return len(kids) if kids or "--autoscale" in root.cmdline() else 1
    except psutil.Error:
        return 0


async def _wait_backlog(bootstrap: str, timeout_s: float) -> int:
    """Wait until the upstream stages have no lag and the embed backlog stopped
    growing; return the embed lag (messages).  Raises TimeoutError."""
    from streams.lag import by_stage, read_lag, stage_targets

    deadline, last, steady = time.monotonic() + timeout_s, -1, 0
    while time.monotonic() < deadline:
        lag = by_stage(await read_lag(bootstrap, stage_targets([*UPSTREAM, "embed"])))
        upstream = sum((lag[s]["lag"] or 0) for s in UPSTREAM)
        embed = lag["embed"]["lag"] if lag["embed"]["lag"] is not None else lag["embed"]["end"]
        steady = steady + 1 if (upstream == 0 and embed == last and embed > 0) else 0
        if steady >= 3:
            return embed
        last = embed
        await asyncio.sleep(2)
    raise TimeoutError(f"embed backlog not settled in {timeout_s:.0f} s")


def drain(settings, env: dict[str, str], paths: list[Path], *, autoscale: bool, log_dir: Path,
          console: Console, idle_wait_s: float = 120.0, timeout_s: float = 900.0,
          other_workers: tuple[int, ...] = ()) -> DrainRun:
    """One drain of ``paths`` (see the module docstring); the stages other than embed
    must be running (they are, from :func:`bench_autoscale` or the test; their
    worker pids ``other_workers`` get their own line in the CPU shares)."""
    from cli.progress import follow_until_terminal, ingest_and_follow
    from devstack.worker_process import start_worker, stop_worker

    run = DrainRun(autoscale, len(paths))
    project = f"autoscale{int(time.time())}"
    # the two drains' documents differ in one line: emptied, each drain embeds every chunk
    asyncio.run(embed_cache_rows(settings, clear=True))
    quiet = Console(quiet=True)
    outcome = asyncio.run(ingest_and_follow(paths, project=project, category="default", wait=False,
                                            console=quiet, settings=settings))
    wanted = {r.document_id: r.version for r in outcome.results if r.queued}
    run.backlog = asyncio.run(_wait_backlog(settings.kafka_bootstrap, timeout_s))
    console.print(f"  backlog: {run.backlog} chunks of {len(wanted)} documents wait for embed")
    name = "autoscale" if autoscale else "single"
    embed = start_worker(log_dir / f"bench-embed-{name}.log", "embed", env,
                         args=["--autoscale"] if autoscale else [])
    services = service_pids(settings.data_dir)
    meter = CpuMeter({**{name: (lambda pid=pid: [pid]) for name, pid in services.items()},
                      "embed workers": lambda: [embed.pid], "other stages": lambda: list(other_workers)})
    meter.start()
    t0 = time.monotonic()
    done = {"last": None}

    async def _follow():
        done["last"] = await follow_until_terminal(wanted, quiet, timeout_s, settings=settings)

    import threading

    follower = threading.Thread(target=lambda: asyncio.run(_follow()), daemon=True)
    follower.start()
    try:
        while follower.is_alive():
            run.consumers.append((round(time.monotonic() - t0, 1), _embed_consumers(embed)))
            meter.poll()
            follower.join(1.0)
        run.seconds = time.monotonic() - t0
        run.cpu = meter.stop()
        last = done["last"] or {}
        run.completed = sum(1 for ev in last.values() if ev.status == "COMPLETED")
        if autoscale:  # consumers fall back once idle (the scale-down cool-down)
            floor = 1
            until = time.monotonic() + idle_wait_s
            while time.monotonic() < until:
                n = _embed_consumers(embed)
                run.consumers.append((round(time.monotonic() - t0, 1), n))
                if n <= floor and run.max_consumers > floor:
                    run.fell_back_after_s = round(time.monotonic() - t0 - run.seconds, 1)
                    break
                time.sleep(1.0)
    finally:
        stop_worker(embed)
    return run


def consumer_timeline(run: DrainRun) -> str:
    """``t=0s:1 t=12s:3 ...``: the samples where the count changed."""
    out, prev = [], None
    for t, n in run.consumers:
        if n != prev:
            out.append(f"t={t:.0f}s:{n}")
            prev = n
    return " ".join(out)


def bench_autoscale(docs: int, console: Console, embed_batch: int = 1, target_s: float = 5.0,
                    settings=None, log_dir: Optional[Path] = None,
                    cooldown_s: float = 20.0) -> tuple[DrainRun, DrainRun]:
    """Both drains on the running stack ``settings`` (default: start the embedded
    stack); prints docs/s, the ratio and the consumer timelines."""
    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    if settings is None:
        settings = get_settings()
        devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    log_dir = log_dir or settings.data_dir / "logs"
    env = {"RAGSTREAM_EMBED_MAX_BATCH": str(embed_batch), "RAGSTREAM_AUTOSCALE_TARGET_S": str(target_s),
           "RAGSTREAM_AUTOSCALE_INTERVAL_S": "2", "RAGSTREAM_AUTOSCALE_UP_COOLDOWN_S": "8",
           "RAGSTREAM_AUTOSCALE_COOLDOWN_S": str(cooldown_s)}
    # the broker's storage decides what more consumers can win here: on s3:// every
    # Fetch lists the partition's objects (README quirk 6), and 4 consumers kept the
    # 2-core machine busy in SeaweedFS and the broker (ratio 1.01 vs 1.38 in memory)
    console.print(f"broker storage: {settings.broker_storage} (RAGSTREAM_BROKER_STORAGE)", highlight=False)
    rest = start_worker(log_dir / "bench-autoscale-rest.log", NOT_EMBED, env)
    work = Path(tempfile.mkdtemp(prefix="ragstream-autoscale-"))
    try:
        runs = []
        for autoscale in (False, True):
            console.print(f"{'autoscale' if autoscale else 'one embed consumer'}:")
            paths = write_docs(work / ("auto" if autoscale else "single"), docs)
            # distinct content per run: the second run must not dedupe against the first
            for p in paths:
                p.write_text(p.read_text() + f"\nrun {'auto' if autoscale else 'single'} {time.time()}\n")
            r = drain(settings, env, paths, autoscale=autoscale, log_dir=log_dir, console=console,
                      idle_wait_s=cooldown_s + 60, other_workers=(rest.pid,))
            console.print(f"  {r.completed}/{r.docs} COMPLETED in {r.seconds:.1f} s = {r.docs_per_s:.2f} docs/s"
                          f" ({r.backlog / r.seconds if r.seconds else 0:.1f} chunks/s); "
                          f"consumers: {consumer_timeline(r)}"
                          + (f"; back to 1 {r.fell_back_after_s} s after done" if r.fell_back_after_s else ""))
            console.print(f"  cpu: {r.cpu.line()}", highlight=False)
            runs.append(r)
    finally:
        stop_worker(rest)
    single, auto = runs
    ratio = auto.docs_per_s / single.docs_per_s if single.docs_per_s else 0.0
    print(f"docs_per_s_single={single.docs_per_s:.2f} docs_per_s_autoscale={auto.docs_per_s:.2f} "
          f"ratio={ratio:.2f} max_consumers={auto.max_consumers}", file=sys.stdout, flush=True)
    return single, auto
