"""The ``ragstream worker`` child process, as the demo, the drills, the tests and the
benchmarks start it next to the embedded stack: its own session (process group),
its log appended to a file, stopped by SIGTERM to the group (SIGKILL after a grace).

The worker runs in a session of its own, so it does not die with its parent: a
benchmark killed by SIGTERM (Python's default: exit at once, no ``finally``) used to
leave its worker running against the stack.  :func:`start_worker` therefore makes
SIGTERM raise ``SystemExit(143)`` in the parent (:func:`exit_on_sigterm`), so the
caller's ``finally: stop_worker(...)`` runs.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence


def exit_on_sigterm() -> None:
    """Make SIGTERM raise ``SystemExit(128 + 15)`` in this process (so ``finally``
    blocks and context managers run), when SIGTERM still has its default action and
    this is the main thread (the only one Python lets set a handler); a handler
    someone else installed is left alone."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        def handler(signum, frame):  # noqa: ARG001 — the signal handler signature
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, handler)


def start_worker(log_path: Path, stages: str = "all",
                 env: dict[str, str] | None = None, args: Sequence[str] = (),
                 prefix: Sequence[str] = ()) -> subprocess.Popen:
    """Start ``ragstream worker`` as a child process logging to ``log_path``;
    ``env`` entries override this process's environment (e.g. RAGSTREAM_* settings);
    ``args`` are added to the command line (e.g. ``--autoscale``); ``prefix`` runs it
    through a command that execs it (``ip netns exec NS``: the hosts drill).  Also
    :func:`exit_on_sigterm`, so a terminated caller still stops the worker."""
    exit_on_sigterm()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # the console script, not `python -m`: -m puts the repo root on sys.path, where the
    # model repository folder triton/ would shadow the `triton` package torch probes for
    return subprocess.Popen(
        [*prefix, str(Path(sys.executable).with_name("ragstream")), "worker", "--stages", stages,
         "--loglevel", "info", *args],
        stdout=open(log_path, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def stop_worker(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM the worker's process group, SIGKILL after ``grace_s`` seconds."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
