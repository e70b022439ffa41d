"""The blocking-work pool: parsing and chunking run here, off the event loop.

Processes are never forked from the worker itself (a peer pipeline hung forever
forking a pool after torch/OpenMP threads were loaded, ../shared/DESIGN.md).  They are
started with ``spawn`` and load their libraries on first use, or, for a ``preload``
pool (the partition stage's), forked from multiprocessing's fork server after it
has loaded the parsers (``stages/preload_parsers.py``) with one thread per library:
measured 2026-12-02 (2-core VM), the server holds 2 threads then (its own and
jemalloc's background thread), and a forked process parses its first TXT file in
0.02 s instead of 2.6 s, its first PDF in 0.03 s instead of 0.65 s.

Per-task isolation (issue 8, item 4).  The pool is a ``pebble.ProcessPool``:

* a call's deadline counts from the moment a worker process *starts* the task
  (pebble stamps the task when the worker acknowledges it), not from
  submission, so time spent queued behind other documents is free;
* on timeout pebble kills only the process running that task and starts a
  replacement; the caller gets StageTimeout, every other queued or running task
  carries on;
* when the process running a task dies (segfault, ``os._exit``, OOM kill),
  only that call gets WorkerCrashed;
* cancelling the awaiting coroutine cancels the task: dropped if still queued,
  its process killed if running.

The previous ``concurrent.futures.ProcessPoolExecutor`` could not do this: one
dead or killed process broke the whole executor, and every other document in it
failed "parser process crashed" (observed: a 200-page scan timing out took two
99-byte text files down with it).

At most ``workers`` tasks are handed to pebble at a time; the rest wait on an
asyncio semaphore (their deadline has not started).  This keeps large argument
payloads out of the inter-process pipe and bounds what a pool-wide failure can
touch.  Pool-wide failures are rare in pebble but exist: when a worker dies
before the pool has registered the task it just took (a window of a few
milliseconds, so only for tasks that crash at once), pebble declares the whole
pool broken and fails every task in it with ``BrokenProcessPool``.  Such calls
cannot tell culprit from bystander, so each is re-run once on a fresh pool; a
second pool-wide failure is reported as WorkerCrashed.  In the same window with
other tasks running, pebble loses track of the crashed task, which then ends by
its deadline (StageTimeout) instead of WorkerCrashed.  A task whose process exits
with status 0 (``os._exit(0)`` or ``sys.exit()`` in C code) is not reported
either and also ends by its deadline.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
import os
import signal
import threading
import weakref
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Optional

from pebble import ProcessExpired, ProcessPool
from pebble.common.types import CONSTS as _PEBBLE_CONSTS
from pebble.common.types import RemoteTraceback

# Pool processes ignore SIGTERM (see _init_worker), so pebble's stop — SIGTERM, wait
# ``term_timeout`` (3 s by default), then SIGKILL — would wait for nothing: go to
# SIGKILL after half a second.  One place, pebble 5.x's module constant.
_PEBBLE_CONSTS.term_timeout = 0.5

log = logging.getLogger(__name__)

THREAD_VARS = ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class WorkerCrashed(RuntimeError):
    """The process running a task died (crash or out of memory)."""


class StageTimeout(TimeoutError):
    """A task ran longer than its deadline (seconds, counted from its start)."""


class _PoolReset(BrokenProcessPool):
    """Set on calls still in flight when ``reset(kill=True)``/``close`` stopped the pool."""


def _init_worker(nice: int = 0) -> None:
    if nice > 0:
        os.nice(nice)  # lower CPU priority only: raising it needs CAP_SYS_NICE
    ignore_stop_signals()
    limit_threads()
    from stages.filenames import install_log_escaping

    install_log_escaping()  # file names in the parsers' log records
    cap_memory()


def ignore_stop_signals() -> None:
    """Ignore SIGTERM and SIGINT in this process (a pool process or its fork server).
    The parent decides when a pool process ends (deadline, cancel, close); a SIGTERM
    or Ctrl-C sent to the worker's process group (a redeploy, `dev down`) must not
    kill a parse half-way and fail its document as "crashed" (drill redeploy)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def limit_threads() -> None:
    """One thread per native library in this process (``THREAD_VARS`` = 1 unless set)
    and no telemetry: set before numpy, torch or tokenizers load, so they start no
    thread pools (a fork after they did can hang; a 2-core machine gains nothing)."""
    for var in THREAD_VARS:
        os.environ.setdefault(var, "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


#: what a preloading pool's fork server imports before it forks pool processes
PRELOAD_MODULES = ("stages.preload_parsers",)


def _context(preload: bool):
    """The multiprocessing context of a pool: ``spawn`` (a fresh interpreter per
    process), or with ``preload`` a ``forkserver`` that has imported
    :data:`PRELOAD_MODULES` once, so every process it forks starts with them loaded.
    The fork server is one per worker process (multiprocessing's); the preload list is
    the same for every pool, so whichever pool starts it first starts the same one."""
    if not preload:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD_MODULES))
    return context


def _started() -> int:
    """The no-op task ``BlockingPool.start`` schedules: the pool process's pid."""
    return os.getpid()


def cap_memory(megabytes: int | None = None) -> int:
    """Cap this process's address space (RLIMIT_AS) at ``megabytes`` MiB (default
    ``RAGSTREAM_PARSE_MEMORY_MB``, 6144; 0 = no cap) and return the cap applied.

    Called in every pool process: a runaway parse then gets MemoryError (reported by
    ``stages.partition`` as ``stages.errors.OutOfMemory``, "out of memory: ... parse
    exceeded the 6,144 MiB cap") or, if C code aborts on a failed allocation, its
    process dies and only that task fails; the worker and other tasks carry on.
    Measured peaks (VmPeak) of one pool process: hi_res PDF 2.4 GiB, image OCR 3.4 GiB.
    """
    import resource

    from stages.limits import limit

    mb = limit("parse_memory_mb") if megabytes is None else megabytes
    if mb > 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = mb * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return mb


def _remote(exc: BaseException) -> bool:
    """True when ``exc`` was raised by the task function itself (in the worker)."""
    return isinstance(exc.__cause__, RemoteTraceback)


async def _completion(future: Future) -> None:
    """Return once the concurrent ``future`` is done (result or not) without reading it.

    ``asyncio.wrap_future`` would rewrite a ``TimeoutError`` and drop its cause,
    which tells a deadline kill from a TimeoutError raised by the task.
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def _wake(_: Future) -> None:
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

    future.add_done_callback(_wake)
    await done


LONG_WAIT_LOG_S = 60.0  # a task awaited longer than this is logged, then every as long again


async def _completion_logged(future: Future, fn: Callable[..., Any], timeout_s: float) -> None:
    """:func:`_completion`, logging a WARNING every LONG_WAIT_LOG_S seconds while the
    task is not done (whether a process has started it, how long it has waited), so
    a stage that waits on its pool for minutes says so in its log."""
    waiting = asyncio.ensure_future(_completion(future))
    waited = 0.0
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=LONG_WAIT_LOG_S)
            if done:
                return
            waited += LONG_WAIT_LOG_S
            log.warning("pool task %s not done after %.0f s (%s; deadline %.0f s once started)",
                        getattr(fn, "__name__", fn), waited,
                        "running in a pool process" if future.running() else "not started by a process yet",
                        timeout_s)
    finally:
        waiting.cancel()


def _describe_exit(exc: ProcessExpired) -> str:
    code = exc.exitcode
    if code is not None and code < 0:
        return f"killed by signal {-code}"
    return f"exit status {code}"


class BlockingPool:
    """A process pool (spawned, or forked from a preloaded server) with per-task deadlines
    and per-task failure.

    ``workers`` processes (at least 1) run tasks; with ``max_tasks`` > 0 each
    process is replaced after that many tasks (bounds leaks in parser
    libraries).  ``join_timeout_s`` bounds how long ``close`` waits for running
    tasks before killing them.  Processes start on the first ``run`` (or ``start``).
    ``preload``: processes are forked from a fork server that has imported
    :data:`PRELOAD_MODULES` (``stages.preload_parsers``: the parsers and their models,
    loaded once per worker process), so a new or replacement process starts with them
    loaded instead of paying seconds on its first task; without it processes are
    spawned and load what they need on first use.  ``nice`` (0–19): each process lowers
    its CPU priority by this much when it starts (``os.nice``; a bulk pool's parses yield
    the cores to interactive work, issue 26); 0 keeps the worker's priority.
    """

    def __init__(self, workers: int = 1, *, max_tasks: int = 0, join_timeout_s: float = 5.0,
                 preload: bool = False, nice: int = 0):
        self.workers = max(1, workers)
        self.preload = preload
        self.nice = max(0, min(19, nice))
        self.max_tasks = max(0, max_tasks)
        self.join_timeout_s = join_timeout_s
        self._pool: Optional[ProcessPool] = None
        self._inflight: dict[ProcessPool, set] = {}  # live pebble pool -> its submitted futures
        self._reset_pools: weakref.WeakSet = weakref.WeakSet()  # stopped by reset()/close()
        self._lock = threading.Lock()
        self._slots: Optional[asyncio.Semaphore] = None
        self._slots_loop: Optional[asyncio.AbstractEventLoop] = None

    # -- pebble pool lifecycle -------------------------------------------------
    def _current(self) -> ProcessPool:
        with self._lock:
            if self._pool is not None and not self._pool.active:  # broken or stopped
                self._discard_locked(self._pool, kill=True)
            if self._pool is None:
                self._pool = ProcessPool(
                    max_workers=self.workers, max_tasks=self.max_tasks,
                    initializer=functools.partial(_init_worker, self.nice),
                    context=_context(self.preload))
                self._inflight[self._pool] = set()
            return self._pool

    def _discard_locked(self, pool: ProcessPool, kill: bool,
                        deliberate: bool = False) -> Optional[threading.Thread]:
        """Detach ``pool`` and stop it in a background thread (caller holds the lock).

        ``deliberate``: stopped by reset()/close(), so its failed calls are not re-run.
        """
        if deliberate:
            self._reset_pools.add(pool)
        if self._pool is pool:
            self._pool = None
        if pool not in self._inflight:  # already discarded by another caller
            return None
        futures = self._inflight.pop(pool)

        def _stop() -> None:
            try:
                if kill:
                    pool.stop()
                else:
                    pool.close()
                    try:
                        pool.join(timeout=self.join_timeout_s)
                        return
                    except TimeoutError:
                        pool.stop()
                pool.join()
            except Exception:  # noqa: BLE001 - a pool that will not stop must not stop us
                log.exception("stopping the blocking-work pool failed")
            finally:
                for fut in list(futures):  # stopped before they finished: never resolved by pebble
                    if not fut.done():
                        try:
                            fut.set_exception(_PoolReset("blocking-work pool was reset"))
                        except Exception:  # noqa: BLE001 - resolved concurrently
                            pass

        thread = threading.Thread(target=_stop, name="ragstream-pool-stop", daemon=True)
        thread.start()
        return thread

    def _slots_for_loop(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = asyncio.Semaphore(self.workers), loop
        return self._slots

    # -- public API --------------------------------------------------------------
    async def run(self, fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
        """Run ``fn(*args)`` in a worker process and return its result.

        ``fn`` and ``args`` must be picklable (``fn`` importable by module name in
        a spawned process).  Exceptions raised by ``fn`` propagate unchanged.

        Raises StageTimeout when the task runs longer than ``timeout_s`` seconds
        after it started (its process is killed), WorkerCrashed when its process
        died.  Neither affects other calls.  Cancelling the caller cancels the
        task (killing its process if it is running).
        """
        async with self._slots_for_loop():
            for attempt in (1, 2):
                pool = self._current()
                try:
                    future = pool.schedule(fn, args=args, timeout=timeout_s)
                except RuntimeError:  # pool broke between the check and schedule
                    with self._lock:
                        self._discard_locked(pool, kill=True)
                    continue
                with self._lock:
                    inflight = self._inflight.get(pool)
                    if inflight is not None:
                        inflight.add(future)
                        future.add_done_callback(inflight.discard)
                try:
                    await _completion_logged(future, fn, timeout_s)
                except asyncio.CancelledError:
                    future.cancel()  # pebble kills the process if the task is running
                    raise
                if future.cancelled():  # by pebble or a reset, never by our caller
                    raise WorkerCrashed("parser task was cancelled by a pool reset")
                exc = future.exception()
                if exc is None:
                    return future.result()
                if _remote(exc):  # raised by fn itself: unchanged
                    raise exc
                if isinstance(exc, TimeoutError):
                    raise StageTimeout(f"timeout after {timeout_s:.0f} s") from exc
                if isinstance(exc, ProcessExpired):
                    from stages.limits import limit

                    cap = limit("parse_memory_mb")
                    raise WorkerCrashed(
                        f"parser process crashed ({_describe_exit(exc)}; killed, or out of memory"
                        + (f" under the {cap:,} MiB cap)" if cap else ")")) from exc
                if isinstance(exc, _PoolReset) or pool in self._reset_pools:
                    raise WorkerCrashed("parser process stopped: the pool was reset") from exc
                if isinstance(exc, BrokenProcessPool):
                    with self._lock:
                        self._discard_locked(pool, kill=True)
                    if attempt == 2:
                        raise WorkerCrashed("parser process crashed (the pool broke twice)") from exc
                    log.warning("blocking-work pool broke (%s); re-running the task on a new pool", exc)
                    continue
                raise exc  # pebble's own errors (e.g. an unpicklable argument or result)
            raise WorkerCrashed("blocking-work pool could not be started")

    async def start(self, timeout_s: float = 300.0) -> None:
        """Start the pool's processes now rather than on the first ``run`` (pebble
        starts all ``workers`` of them at once), so their start-up (and a
        preloading pool's fork server loading the parsers) happens before the first
        document.  Raises what ``run`` raises (e.g. StageTimeout
        after ``timeout_s`` seconds, counted once a process has started)."""
        await self.run(_started, timeout_s=timeout_s)

    def reset(self, kill: bool = False) -> None:
        """Drop the pool; the next ``run`` starts a fresh one.

        Without ``kill`` running tasks finish (for up to ``join_timeout_s``, then
        they are killed); with ``kill`` its processes are stopped now.  Calls
        whose task was stopped raise WorkerCrashed.
        """
        with self._lock:
            if self._pool is not None:
                self._discard_locked(self._pool, kill=kill, deliberate=True)

    def close(self) -> None:
        """Shut the pool down: running tasks get ``join_timeout_s`` seconds, then are killed.

        Blocks for at most about ``join_timeout_s`` plus pebble's terminate
        grace (3 s per process).
        """
        with self._lock:
            pool = self._pool
            thread = self._discard_locked(pool, kill=False, deliberate=True) if pool is not None else None
        if thread is not None:
            thread.join(self.join_timeout_s + 3.0 * self.workers + 2.0)
