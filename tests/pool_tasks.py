"""Tiny task functions for tests/test_pool.py.

They live in a module of their own because spawned pool processes import a task
function by module name (``tests.pool_tasks``); the spawn start method passes the
parent's ``sys.path`` to the child, so this module is found there as in pytest.
"""
from __future__ import annotations

import os
import time
from pathlib import Path


def double(x: int) -> int:
    """``2 * x`` at once."""
    return 2 * x


def sleep_then(seconds: float, value: object) -> object:
    """Sleep ``seconds`` (a stand-in for a long parse), then return ``value``."""
    time.sleep(seconds)
    return value


def hard_exit(code: int) -> None:
    """End the process at once with ``code``, like a segfault or an OOM kill would."""
    os._exit(code)


def fail(kind: str) -> None:
    """Raise the exception named ``kind`` (``value`` or ``timeout``) from inside the task."""
    if kind == "timeout":
        raise TimeoutError("raised by the task itself")
    raise ValueError("raised by the task itself")


def pid_then_sleep(pid_file: str, seconds: float) -> int:
    """Write this process's pid to ``pid_file``, then sleep ``seconds``."""
    tmp = Path(pid_file + ".tmp")
    tmp.write_text(str(os.getpid()))
    tmp.rename(pid_file)  # atomic: the reader never sees a half-written pid
    time.sleep(seconds)
    return os.getpid()


def preload_state(sleep_s: float = 0.0) -> dict:
    """What a pool process finds loaded (after sleeping ``sleep_s``, so that
    concurrent calls land on different processes): its ``pid``, the preload's record ``warmed``
    (``stages.preload_parsers.WARMED``; empty when the module was not preloaded),
    whether unstructured's PDF partitioner is imported, and its thread count."""
    import sys

    time.sleep(sleep_s)
    module = sys.modules.get("stages.preload_parsers")
    return {"pid": os.getpid(), "warmed": dict(module.WARMED) if module else {},
            "pdf_loaded": "unstructured.partition.pdf" in sys.modules,
            "threads": len(os.listdir("/proc/self/task"))}


def niceness() -> int:
    """This process's niceness (``os.nice(0)``: the current value, unchanged)."""
    return os.nice(0)
