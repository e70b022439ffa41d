"""Where the CPU went during a measured interval: the machine's busy cores and each
stack service's share (broker, s3, postgres, milvus, triton, converter) plus the
worker processes a benchmark started.

A benchmark that scales consumers needs this to tell "the consumers were the
bottleneck" from "the machine was already full": on a 2-core machine whose cores
are busy with one consumer, more consumers cannot drain faster.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _cpu_seconds(procs: Iterable[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def service_pids(data_dir: Path) -> dict[str, int]:
    """``{service: pid}`` from the dev stack's pid files (``data_dir/run/*.pid``)."""
    out = {}
    for f in sorted((Path(data_dir) / "run").glob("*.pid")):
        try:
            out[f.stem] = int(f.read_text().strip())
        except (OSError, ValueError):
            pass
    return out


@dataclass
class CpuShare:
    """CPU over one interval: ``seconds`` of wall time, ``busy_cores`` the machine's
    mean busy cores (of ``cores``), ``by_component`` mean cores per component
    (a process tree: a service and its children, or the named workers)."""

    seconds: float
    cores: int
    busy_cores: float
    by_component: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        """``machine 1.93/2 cores busy: broker 0.61, s3 0.32, ...`` (largest first)."""
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(self.by_component.items(), key=lambda kv: -kv[1]))
        return f"machine {self.busy_cores:.2f}/{self.cores} cores busy: {parts}"


class CpuMeter:
    """Measure CPU between :meth:`start` and :meth:`stop`.

    ``components``: ``{name: callable returning root pids}``, read at every
    :meth:`poll` (processes born during the interval count from their birth; ones
    older but first seen late count from first sight; a process that exits between
    polls loses its last seconds: psutil cannot read a reaped process).
    Component trees must not overlap; the machine figure is psutil.cpu_times()."""

    def __init__(self, components: dict[str, Callable[[], Iterable[int]]]):
        self.components = components
        self._t0 = 0.0
        self._machine0 = None
        self._first: dict[str, dict[tuple[int, float], float]] = {}  # (pid, born) -> cpu s at first sight
        self._last: dict[str, dict[tuple[int, float], float]] = {}

    def start(self) -> None:
        """Begin the interval."""
        self._t0, self._wall0 = time.monotonic(), time.time()
        self._machine0 = psutil.cpu_times()
        self._first, self._last = {}, {}
        self.poll()

    def poll(self) -> None:
        """Read every component's processes now (call every few seconds so processes
        that come and go are counted)."""
        for name, pids in self.components.items():
            first = self._first.setdefault(name, {})
            last = self._last.setdefault(name, {})
            for pid in pids():
                for p in _tree(pid):
                    try:
                        born = p.create_time()
                    except psutil.Error:
                        continue
                    key = (p.pid, born)
                    cpu = _cpu_seconds([p])
                    if key not in first:  # born during the interval: all its CPU counts
                        first[key] = 0.0 if born >= self._wall0 else cpu
                    last[key] = cpu

    def stop(self) -> CpuShare:
        """End the interval; returns the shares."""
        self.poll()
        seconds = max(time.monotonic() - self._t0, 1e-6)
        m0, m1 = self._machine0, psutil.cpu_times()
        idle = (m1.idle + getattr(m1, "iowait", 0.0)) - (m0.idle + getattr(m0, "iowait", 0.0))
        total = sum(m1) - sum(m0)
        cores = psutil.cpu_count() or 1
        busy = cores * (1 - idle / total) if total > 0 else 0.0
        by = {}
        for name in self.components:
            first, last = self._first.get(name, {}), self._last.get(name, {})
            by[name] = sum(last[k] - first[k] for k in last) / seconds
        return CpuShare(seconds=seconds, cores=cores, busy_cores=busy, by_component=by)
