"""The faults the drills inject: worker processes (start, SIGKILL, SIGTERM) and
embedded-stack services (stop, then start again).

Workers are ``ragstream worker --stages S`` subprocesses started like
:func:`devstack.worker_process.start_worker` (own process group, log file per start under
``{data_dir}/logs/drill/``), with ``RAGSTREAM_CALLBACK_ALLOW_HOSTS=127.0.0.1`` so the
drill's loopback callback receiver is allowed.  A worker is *ready* once its log
shows ``ready`` (it joined its consumer group and got partitions).
"""
from __future__ import annotations

import asyncio
import itertools
import re
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from devstack.worker_process import start_worker, stop_worker
from streams.settings import Settings

# each stage process prints "ragstream worker: <stage> ready, N topic partitions assigned"
# (streams/worker.py); a worker is ready when every stage it runs has said so
READY_MARK = re.compile(rb"ragstream worker: (\w+) ready")
WORKER_ENV = {"RAGSTREAM_CALLBACK_ALLOW_HOSTS": "127.0.0.1"}
_serial = itertools.count(1)


class WorkerStartError(RuntimeError):
    """A worker exited, or did not print ``ready`` in time; the message names its log."""


def stages() -> tuple[str, ...]:
    """The pipeline's stages, read at run time (streams.app.STAGES)."""
    from streams.app import STAGES

    return tuple(STAGES)


@dataclass
class Worker:
    """One worker process: ``stages`` is ``"all"`` or one stage name."""

    stages: str
    log: Path
    proc: subprocess.Popen
    started: float = field(default_factory=time.time)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def spawn(settings: Settings, stage_spec: str, label: str, prefix: Sequence[str] = ()) -> Worker:
    """Start ``ragstream worker --stages stage_spec`` (through ``prefix``, e.g. ``ip
    netns exec NS``); log ``{data_dir}/logs/drill/{label}-{stage_spec}-{n}.log``."""
    log = settings.data_dir / "logs" / "drill" / f"{label}-{stage_spec}-{next(_serial)}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    proc = start_worker(log, stages=stage_spec, env=WORKER_ENV, prefix=prefix)
    return Worker(stage_spec, log, proc)


async def wait_ready(worker: Worker, timeout_s: float = 180.0) -> float:
    """Poll the worker's log until it shows ``ready``; returns seconds waited.
    Raises WorkerStartError when it exits first or after ``timeout_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            ready = {m.decode() for m in READY_MARK.findall(worker.log.read_bytes())}
            wanted = set(stages()) if worker.stages == "all" else set(worker.stages.split(","))
            if wanted <= ready:
                return time.monotonic() - t0
        except FileNotFoundError:
            pass
        if not worker.alive():
            raise WorkerStartError(f"worker {worker.stages} exited with {worker.proc.returncode}; "
                                   f"log {worker.log}:\n{worker.log_tail()}")
        await asyncio.sleep(0.25)
    raise WorkerStartError(f"worker {worker.stages} not ready after {timeout_s:.0f} s; "
                           f"log {worker.log}:\n{worker.log_tail()}")


def sigkill(worker: Worker) -> None:
    """SIGKILL the worker's whole process group (its pool children too) and reap it."""
    try:
        os.killpg(worker.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        worker.proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


def sigterm(worker: Worker, grace_s: float = 30.0) -> tuple[float, bool]:
    """SIGTERM the worker's group, SIGKILL after ``grace_s``; returns (seconds,
    whether it stopped by itself within the grace period)."""
    t0 = time.monotonic()
    if not worker.alive():
        return 0.0, True
    stop_worker(worker.proc, grace_s=grace_s)
    took = time.monotonic() - t0
    return took, took < grace_s


class Fleet:
    """Workers in the Procfile layout (one process per stage) or all-in-one.

    ``label`` names the log files.  Always call :meth:`stop` (the drill runner does,
    also on Ctrl-C).
    """

    def __init__(self, settings: Settings, label: str):
        self.settings, self.label = settings, label
        self.workers: dict[str, Worker] = {}
        self.notes: list[str] = []

    async def start(self, specs: Sequence[str], timeout_s: float = 240.0) -> float:
        """Start one worker per spec (a stage, or ``"all"``) and wait until every one
        is ready; returns the seconds it took."""
        t0 = time.monotonic()
        for spec in specs:
            self.workers[spec] = spawn(self.settings, spec, self.label)
        await asyncio.gather(*(wait_ready(self.workers[s], timeout_s) for s in specs))
        return time.monotonic() - t0

    async def start_procfile(self, timeout_s: float = 240.0) -> float:
        """One worker per stage (streams.app.STAGES)."""
        return await self.start(stages(), timeout_s)

    async def kill_and_restart(self, spec: str, timeout_s: float = 240.0) -> float:
        """SIGKILL ``spec``'s worker, start a new one and wait until it is ready;
        returns the seconds from the kill to ready."""
        t0 = time.monotonic()
        sigkill(self.workers[spec])
        self.workers[spec] = spawn(self.settings, spec, self.label)
        await wait_ready(self.workers[spec], timeout_s)
        return time.monotonic() - t0

    def last_line(self, spec: str, needle: str) -> str:
        """The last line of ``spec``'s current worker log that contains ``needle``
        ('' when there is none or no such worker): for a failed drill's notes."""
        worker = self.workers.get(spec)
        if worker is None or not worker.log.exists():
            return ""
        lines = [ln for ln in worker.log.read_text(errors="replace").splitlines() if needle in ln]
        return lines[-1].strip() if lines else ""

    def dead(self) -> list[str]:
        """Specs whose worker has exited."""
        return [s for s, w in self.workers.items() if not w.alive()]

    def stop(self, grace_s: float = 30.0) -> dict[str, float]:
        """SIGTERM every worker (SIGKILL after ``grace_s``); returns seconds per spec.
        A worker that needed SIGKILL is noted in ``notes``."""
        t0 = time.monotonic()
        took: dict[str, float] = {}
        for worker in self.workers.values():  # all at once: the grace periods overlap
            if worker.alive():
                try:
                    os.killpg(worker.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for spec, worker in list(self.workers.items()):
            try:
                worker.proc.wait(max(0.1, grace_s - (time.monotonic() - t0)))
                took[spec] = round(time.monotonic() - t0, 1)
            except subprocess.TimeoutExpired:
                self.notes.append(f"worker {spec} ignored SIGTERM for {grace_s:.0f} s (killed)")
                sigkill(worker)
                took[spec] = round(time.monotonic() - t0, 1)
        self.workers.clear()
        return took


async def restart_service(settings: Settings, name: str, outage_s: float) -> dict[str, object]:
    """Stop the devstack service ``name`` (devstack/services.py etc.), keep it
    down for ``outage_s`` seconds, start it again and wait for its health check.

    Returns ``{"down": outcome, "up_s": seconds to healthy}``; raises
    devstack.DevStackError when it does not come back (the caller notes it
    and tries once more)."""
    import devstack

    outcome = await asyncio.to_thread(devstack.down, settings, names=[name])
    await asyncio.sleep(outage_s)  # the outage itself, not a synchronisation
    t0 = time.monotonic()
    await asyncio.to_thread(devstack.up, settings, names=[name], timeout_s=180.0)
    return {"down": outcome.get(name), "up_s": round(time.monotonic() - t0, 1)}


def ensure_service_up(settings: Settings, name: Optional[str] = None) -> Optional[str]:
    """Start the named service (or the whole stack) if it is down; returns an error
    text when that fails (used in clean-up: never raises)."""
    import devstack

    try:
        devstack.up(settings, names=[name] if name else None, timeout_s=180.0)
        return None
    except Exception as exc:  # noqa: BLE001 — clean-up reports, never raises
        return f"{type(exc).__name__}: {exc}"
