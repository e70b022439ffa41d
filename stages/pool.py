"""The blocking-work pool: parsing and chunking run here, off the event loop.

Processes are started with ``spawn`` (a peer pipeline hung forever forking a pool
after torch/OpenMP threads were loaded, DESIGN.md); each worker limits its own
thread counts and loads its libraries on first use.  A crashed worker process
(segfault, OOM kill) breaks the pool: it is rebuilt and the caller gets
WorkerCrashed for that document only.
"""
from __future__ import annotations

import asyncio
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Optional

THREAD_VARS = ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class WorkerCrashed(RuntimeError):
    """The process running a task died (crash or out of memory)."""


class StageTimeout(TimeoutError):
    """A task ran longer than its deadline (seconds)."""


def _init_worker() -> None:
    for var in THREAD_VARS:
        os.environ.setdefault(var, "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class BlockingPool:
    """A spawn-started process pool with per-call deadlines."""

    def __init__(self, workers: int = 1):
        self.workers = max(1, workers)
        self._pool: Optional[ProcessPoolExecutor] = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker)
        return self._pool

    async def run(self, fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
        """Run ``fn(*args)`` in a worker process; its exceptions propagate.

        Raises StageTimeout after ``timeout_s`` seconds (the pool is rebuilt so the
        stuck process cannot hold a slot) and WorkerCrashed when the process died.
        """
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(self._executor(), fn, *args), timeout_s)
        except asyncio.TimeoutError as exc:
            self.reset(kill=True)
            raise StageTimeout(f"timeout after {timeout_s:.0f} s") from exc
        except BrokenProcessPool as exc:
            self.reset(kill=True)
            raise WorkerCrashed("parser process crashed (killed or out of memory)") from exc

    def reset(self, kill: bool = False) -> None:
        """Drop the pool; with ``kill`` its processes are terminated now."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if kill:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Shut the pool down, waiting for running tasks."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
