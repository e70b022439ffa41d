"""A wall-clock budget for blocking work, enforced with SIGALRM.

Process-pool workers run tasks on their main thread, where ``signal.setitimer``
works and interrupts pure-Python parsers (pdfminer) cleanly.  The alarm raises
``DeadlineExceeded``, a BaseException, so parser code's ``except Exception`` cannot
swallow it; the context manager turns it into ``ConversionTimeout``.  An alarm can
still be lost — raised inside a ``__del__`` or a GC callback, where Python drops
exceptions (and, inside the block, does not print them: they are expected), or
caught by a bare ``except`` — so once the deadline has passed
the alarm repeats every ``REFIRE_S`` seconds, and a block that ends normally after
an alarm fired still raises ``ConversionTimeout`` (seen: a 30-page parse with a
0.2 s budget returned normally in a loaded CI run).  Off the main
thread (or without SIGALRM) the budget is not enforced here; the caller's own
timeout applies.
"""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from stages.errors import ConversionTimeout


#: seconds between repeated alarms once the deadline has passed
REFIRE_S = 0.1


class DeadlineExceeded(BaseException):
    """Raised by the alarm inside the block; never escapes ``deadline``."""


def _quiet_about_deadlines(hook):
    """An ``sys.unraisablehook`` that drops a ``DeadlineExceeded`` Python could not
    raise (the alarm landed in a ``__del__`` or a GC callback: the refiring alarm
    raises it again where it can) and hands every other unraisable to ``hook``."""
    def _hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, DeadlineExceeded):
            hook(unraisable)
    return _hook


@contextmanager
def deadline(seconds: float | None, reason: str) -> Iterator[None]:
    """Raise ``ConversionTimeout(reason)`` if the block runs longer than ``seconds``.

    The timeout is permanent: ``seconds`` is the profile's budget for the document,
    and a retry would hold a parse process for that long again (the pool's own
    StageTimeout is permanent too, agents/retry_policy.py).

    Nested use keeps the outer timer only (the inner block runs unbounded by itself).
    Code inside the block that swallows ``DeadlineExceeded`` delays the timeout by at
    most ``REFIRE_S`` per swallow; a block that still ends normally raises after it.
    """
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
    if not usable:
        yield
        return

    fired = False

    def _expired(signum, frame):
        nonlocal fired
        fired = True
        raise DeadlineExceeded(reason)

    previous = signal.signal(signal.SIGALRM, _expired)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_about_deadlines(previous_hook)
    # after the deadline the alarm fires again every REFIRE_S: one raised where Python
    # drops exceptions (a __del__, a GC callback) or caught by a bare ``except`` is
    # raised again at the next point that lets it through
    signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE_S)
    try:
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except DeadlineExceeded:
        raise ConversionTimeout(reason, permanent=True) from None
    finally:
        signal.signal(signal.SIGALRM, previous)
        sys.unraisablehook = previous_hook
    if fired:  # every alarm was swallowed and the work then finished: still over budget
        raise ConversionTimeout(reason, permanent=True)
