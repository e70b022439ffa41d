"""A last-resort bound on how long a process may take to stop after SIGTERM/SIGINT.

A worker that lived through a broker outage was seen looping on
``OffsetCommit … UnknownTopicOrPartitionError`` and ignoring SIGTERM and SIGINT for
over 80 s: Faust's graceful stop waited on a commit that could never succeed.
:func:`install_shutdown_watchdog` makes every stop bounded: the first SIGTERM or
SIGINT arms a daemon timer; if the process is still alive ``grace_s`` seconds later
the timer logs what happened and hard-exits with :data:`WATCHDOG_EXIT_CODE`
(``os._exit``: no cleanup, no waiting for threads).  The graceful path is untouched:
every signal still reaches the handler that was installed before (Faust's, uvicorn's,
Python's default).

How it coexists with asyncio: ``loop.add_signal_handler`` (Faust/mode installs its
handlers that way, *after* this is called, when the worker starts) replaces the
Python-level handler with a no-op and relies on the C-level wakeup fd, which is
written for every signal with any Python handler.  So the watchdog wraps the
current event loop's ``add_signal_handler``: whenever SIGTERM/SIGINT is registered
there, the watchdog's handler is put back in front (asyncio's dispatch through the
wakeup fd is unaffected).  Handlers installed later with ``signal.signal`` replace
the watchdog; call :func:`install_shutdown_watchdog` after them (it chains to them).
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Optional

log = logging.getLogger(__name__)

WATCHDOG_EXIT_CODE = 75  # distinct from signal deaths (128+n) and normal errors (1, 2)
SIGNALS = (signal.SIGTERM, signal.SIGINT)

_state: dict[str, Any] = {"grace_s": 30.0, "timer": None, "armed_at": None, "signal": None}
_lock = threading.Lock()


def _hard_exit() -> None:
    grace = _state["grace_s"]
    msg = (f"ragstream shutdown watchdog: still running {grace:.1f} s after "
           f"{_state['signal']}; hard exit with code {WATCHDOG_EXIT_CODE}")
    try:
        log.critical(msg)
        print(msg, file=sys.stderr, flush=True)
    finally:
        os._exit(WATCHDOG_EXIT_CODE)


def _arm(signum: int) -> None:
    with _lock:
        if _state["timer"] is not None:
            return
        _state["signal"] = signal.Signals(signum).name
        _state["armed_at"] = time.monotonic()
        timer = threading.Timer(_state["grace_s"], _hard_exit)
        timer.daemon = True
        timer.name = "shutdown-watchdog"
        _state["timer"] = timer
        timer.start()
    print(f"ragstream shutdown watchdog: {_state['signal']} received; hard exit in "
          f"{_state['grace_s']:.1f} s unless shutdown completes", file=sys.stderr, flush=True)


def _make_handler(previous: Any) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        _arm(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL or previous is None:
            # what the default action would have done: die by the signal
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        # SIG_IGN: ignored, as before (the watchdog is still armed)

    handler._ragstream_watchdog = True  # type: ignore[attr-defined]
    return handler


def _install_handlers() -> None:
    for sig in SIGNALS:
        previous = signal.getsignal(sig)
        if getattr(previous, "_ragstream_watchdog", False):
            continue
        signal.signal(sig, _make_handler(previous))


def _wrap_loop(loop: asyncio.AbstractEventLoop) -> None:
    original = loop.add_signal_handler
    if getattr(original, "_ragstream_watchdog", False):
        return

    def add_signal_handler(sig: int, callback: Callable[..., Any], *args: Any) -> None:
        original(sig, callback, *args)
        if sig in SIGNALS:
            _install_handlers()  # chains to asyncio's no-op; dispatch stays via the wakeup fd

    add_signal_handler._ragstream_watchdog = True  # type: ignore[attr-defined]
    loop.add_signal_handler = add_signal_handler  # type: ignore[method-assign]


def install_shutdown_watchdog(grace_s: float = 30.0,
                              loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
    """Hard-exit the process ``grace_s`` seconds after the first SIGTERM/SIGINT
    unless it has exited by then.

    Call from the main thread.  Chains to the handlers installed before; also keeps
    itself in front of handlers that ``loop`` (default: the thread's current event
    loop, if one is set) registers later with ``add_signal_handler``.  Idempotent
    (a second call only updates ``grace_s``).  Exit code when it fires:
    :data:`WATCHDOG_EXIT_CODE`.
    """
    _state["grace_s"] = float(grace_s)
    _install_handlers()
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            try:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                loop = None
    if loop is not None:
        _wrap_loop(loop)


def armed_for_s() -> Optional[float]:
    """Seconds since the watchdog was armed by a signal (None: not armed)."""
    armed = _state["armed_at"]
    return None if armed is None else time.monotonic() - armed
