"""What the partition pool's fork server loads before it forks parse processes.

multiprocessing imports this module in its fork server (``stages.pool``, a pool with
``preload``), once per worker process; every parse process forked from the server
then starts with the parsers and models loaded: the work of :func:`stages.warm.warm_parsers`,
about 3.6 s of one core on the 2-core dev VM, is done once instead of at the start
of every process, and a process that replaces one killed at its deadline starts warm
at once.

On import, in this order:

1. one thread per native library (``stages.pool.limit_threads``), before anything
   loads numpy or torch: a fork after they started thread pools can hang;
2. SIGTERM and SIGINT ignored (``stages.pool.ignore_stop_signals``): a redeploy
   signals the worker's whole process group, and a fork server that died would make
   every running parse look crashed (multiprocessing then reports its children's
   exit status as 255);
3. :func:`stages.warm.warm_parsers`, interrupted after :data:`WARM_LIMIT_S`; any
   failure is logged and swallowed (the server must come up: a process then loads
   what it needs on first use, as a spawned one does).

``WARMED`` records the outcome for tests: ``pid`` of the server, ``seconds`` or ``error``.
"""
from __future__ import annotations

import logging
import os
import signal
import time

from stages.pool import ignore_stop_signals, limit_threads

limit_threads()
ignore_stop_signals()

log = logging.getLogger(__name__)

WARM_LIMIT_S = 120.0  # a warm-up still running after this is interrupted (SIGALRM)

WARMED: dict = {"pid": os.getpid()}


def _too_long(signum, frame):  # noqa: ARG001 - a signal handler's signature
    raise TimeoutError(f"warm-up took over {WARM_LIMIT_S:.0f} s")


def _warm() -> None:
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _too_long)
    signal.setitimer(signal.ITIMER_REAL, WARM_LIMIT_S)
    try:
        from stages.warm import warm_parsers

        warm_parsers()
    except BaseException as exc:  # noqa: BLE001 - the server must start; tasks load what is missing
        WARMED["error"] = f"{type(exc).__name__}: {exc}"
        log.warning("parse processes' preload failed (%s); they load parsers on first use",
                    WARMED["error"])
    else:
        WARMED["seconds"] = round(time.perf_counter() - start, 2)
        log.info("parse processes' fork server %d loaded the parsers in %.1f s",
                 os.getpid(), WARMED["seconds"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_warm()
