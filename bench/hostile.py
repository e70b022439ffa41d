"""``ragstream bench hostile --cases DIR``: every file of a folder through the full pipeline.

Files are ingested one at a time (the CLI path: S3 upload, upload event) into the
embedded stack with one all-stages worker, as ``bench e2e`` does, and each is
followed to its terminal status.  Per file it prints: status, failure code, seconds
(upload to terminal status), peak RSS of the parse processes (MB) and chunks.

Peak RSS: the parse processes are the worker's process-pool children (spawned
``multiprocessing`` processes under the worker).  Before each file their kernel
peak (``VmHWM``) is reset (``/proc/PID/clear_refs`` ← ``5``); while the file runs a
thread samples their RSS every 50 ms (a process that dies keeps its last sample);
after it, the peak is the larger of the samples and each live process's ``VmHWM``.
A pool process over ``--max-rss-mb`` is killed by the sampler (the machine is
shared; the file then ends FAILED ``parser_crashed``) and the row says so.

Verdict per file (``ok``): ``expected.json`` in the folder maps a file name to
``"completed"`` or a failure code; a listed file is ok when it ended that way
(``completed`` = COMPLETED with at least one chunk).  A file not listed is ok when it
COMPLETED with chunks or FAILED with a code other than ``internal``.  ``README*``,
``expected.json`` and dot-files are not cases.  Last line:
``hostile_ok=<n>/<m> max_rss_mb=<x>``.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import psutil
from rich.console import Console
from rich.table import Table

from stages.filenames import printable

SAMPLE_S = 0.05


@dataclass
class CaseResult:
    """One file's run: terminal ``status`` (or ``TIMEOUT``), ``code``, ``seconds``,
    ``rss_mb`` (peak of the parse processes), ``chunks``, ``ok``, ``note``."""

    name: str
    status: str = ""
    code: str = ""
    seconds: float = 0.0
    rss_mb: float = 0.0
    chunks: int = 0
    ok: bool = False
    note: str = ""


def case_files(folder: Path) -> list[Path]:
    """The cases of ``folder``: its files (recursive, sorted) except README*,
    ``expected.json`` and dot-files."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
                  and not p.name.upper().startswith("README") and p.name != "expected.json")


@dataclass(frozen=True)
class Expectation:
    """What one case must give: ``outcome`` ("completed" or a failure code), and for
    a completed one the ``markers`` its indexed text must contain and the
    ``forbidden`` words it must not (``../shared/cases/README.md``)."""

    outcome: str
    markers: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()


def load_expected(folder: Path, path: Optional[Path] = None) -> dict[str, Expectation]:
    """``path`` (default: ``expected.json`` of ``folder``): file name or relative path →
    "completed", a code, or ``{"outcome": ..., "markers": [...], "forbidden": [...]}``;
    ``{}`` when the default file is absent.  Raises ValueError when it is not such a
    JSON object, FileNotFoundError for a given ``path`` missing."""
    if path is None:
        path = folder / "expected.json"
        if not path.exists():
            return {}
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such expectations file")
    data = json.loads(path.read_text())
    bad = ValueError(f"{path}: expected a JSON object of file name → \"completed\", a code, or "
                     "{\"outcome\", \"markers\", \"forbidden\"}")
    if not isinstance(data, dict):
        raise bad
    out: dict[str, Expectation] = {}
    for name, value in data.items():
        if isinstance(value, str):
            out[name] = Expectation(value)
        elif isinstance(value, dict) and isinstance(value.get("outcome"), str):
            out[name] = Expectation(value["outcome"], tuple(value.get("markers", ())),
                                    tuple(value.get("forbidden", ())))
        else:
            raise bad
    return out


def verdict(status: str, code: Optional[str], chunks: int, expected: Optional[str]) -> bool:
    """True when the outcome is acceptable (see the module docstring)."""
    completed = status == "COMPLETED" and chunks > 0
    if expected is None:
        return completed or (status == "FAILED" and bool(code) and code != "internal")
    if expected == "completed":
        return completed
    return status == "FAILED" and code == expected


def text_verdict(text: str, expectation: Optional[Expectation]) -> str:
    """'' when ``text`` (a completed document's chunks) holds every marker and no
    forbidden word of ``expectation``, else what is wrong."""
    if expectation is None:
        return ""
    missing = [m for m in expectation.markers if m not in text]
    leaked = [w for w in expectation.forbidden if w in text]
    return "; ".join(filter(None, [f"missing {', '.join(missing)}" if missing else "",
                                   f"forbidden {', '.join(leaked)}" if leaked else ""]))


async def indexed_text(settings, project: str, document_id: str, version: int) -> str:
    """The chunk texts of a completed document version (its ``processed/`` object)."""
    import orjson

    from adapters.object_keys import processed_key
    from adapters.object_store import ObjectStore

    async with ObjectStore(settings) as store:
        body = orjson.loads(await store.get_bytes(processed_key(project, document_id, version)))
    return "\n".join(c["text"] for c in body["chunks"])


def pool_processes(root_pid: int) -> list[psutil.Process]:
    """The process-pool children (``multiprocessing`` spawn) under ``root_pid``."""
    try:
        procs = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            if "multiprocessing" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:
            pass
    return out


def _vm_hwm_mb(pid: int) -> float:
    """Peak RSS (``VmHWM``) of ``pid`` in MB, 0 when unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class PeakSampler:
    """Samples the pool processes under ``root_pid`` every 50 ms while running;
    kills one whose RSS passes ``cap_mb``.  ``stop()`` returns (peak MB, note)."""

    def __init__(self, root_pid: int, cap_mb: float):
        self.root_pid, self.cap_mb = root_pid, cap_mb
        self.peak, self.note = 0.0, ""
        self._stop = threading.Event()
        for p in pool_processes(root_pid):  # reset each live pool process's peak
            try:
                Path(f"/proc/{p.pid}/clear_refs").write_text("5")
            except OSError:
                pass
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in pool_processes(self.root_pid):
                try:
                    mb = p.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self.peak = max(self.peak, mb)
                if mb > self.cap_mb:
                    self.note = f"pool process killed at {mb:.0f} MB (cap {self.cap_mb:.0f} MB)"
                    try:
                        os.kill(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
            self._stop.wait(SAMPLE_S)

    def stop(self) -> tuple[float, str]:
        self._stop.set()
        self._thread.join()
        for p in pool_processes(self.root_pid):
            self.peak = max(self.peak, _vm_hwm_mb(p.pid))
        return self.peak, self.note


def run_case(path: Path, *, project: str, worker_pid: int, timeout_s: float, cap_mb: float,
             expected: Optional[Expectation], settings) -> CaseResult:
    """Ingest ``path`` and follow it to its terminal status (see the module docstring)."""
    from cli.progress import ingest_and_follow

    res = CaseResult(path.name)
    sampler = PeakSampler(worker_pid, cap_mb)
    t0 = time.perf_counter()
    try:
        outcome = asyncio.run(ingest_and_follow([path], project=project, category="default",
                                                timeout_s=timeout_s, console=Console(quiet=True),
                                                settings=settings))
    finally:
        res.seconds = time.perf_counter() - t0
        res.rss_mb, res.note = sampler.stop()
    last = next(iter(outcome.last.values()), None)
    if outcome.timed_out or last is None:
        res.status = "TIMEOUT" if outcome.timed_out else "NOT QUEUED"
    else:
        res.status, res.code, res.chunks = last.status, last.error_code or "", last.chunks_total
        if last.status == "FAILED" and last.error:
            res.note = "; ".join(filter(None, [res.note, last.error]))
    res.ok = verdict(res.status, res.code or None, res.chunks, expected.outcome if expected else None)
    if res.ok and res.status == "COMPLETED" and expected and (expected.markers or expected.forbidden):
        doc_id = outcome.results[0].document_id
        text = asyncio.run(indexed_text(settings, project, doc_id, outcome.last[doc_id].version))
        wrong = text_verdict(text, expected)
        if wrong:
            res.ok, res.note = False, "; ".join(filter(None, [res.note, wrong]))
    return res


def bench_hostile(cases: Path, console: Console, *, timeout_s: float = 600.0,
                  max_rss_mb: float = 6144.0, keep_running: bool = False,
                  expected_path: Optional[Path] = None) -> tuple[int, int, float]:
    """Run every case of ``cases`` through the pipeline and print the table and the last
    line; returns (ok, total, max peak RSS MB)."""
    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    settings = get_settings()
    expected = load_expected(cases, expected_path)
    files = case_files(cases)
    project = "hostile" + uuid.uuid4().hex[:8]
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    log = settings.data_dir / "logs" / "bench-hostile-worker.log"
    worker = start_worker(log)
    results: list[CaseResult] = []
    try:
        console.print(f"cases: {cases} ({len(files)} files), worker log {log}")
        for f in files:
            rel = f.relative_to(cases).as_posix()
            exp = expected.get(rel, expected.get(f.name))
            r = run_case(f, project=project, worker_pid=worker.pid, timeout_s=timeout_s,
                         cap_mb=max_rss_mb, expected=exp, settings=settings)
            r.name = rel
            results.append(r)
            console.print(f"{'ok ' if r.ok else 'BAD'} {printable(rel)}: {r.status} {r.code} "
                          f"{r.seconds:.1f} s {r.rss_mb:.0f} MB {r.chunks} chunks", highlight=False,
                          markup=False)
    finally:
        stop_worker(worker)
        if not keep_running:
            devstack.down(settings)
    table = Table("file", "status", "code", "seconds", "peak RSS MB", "chunks", "ok", "note")
    for r in results:
        table.add_row(printable(r.name), r.status, r.code, f"{r.seconds:.1f}", f"{r.rss_mb:.0f}",
                      str(r.chunks), "yes" if r.ok else "NO", printable(r.note)[:120])
    console.print(table)
    ok = sum(r.ok for r in results)
    peak = max((r.rss_mb for r in results), default=0.0)
    print(f"hostile_ok={ok}/{len(results)} max_rss_mb={peak:.0f}")
    return ok, len(results), peak
