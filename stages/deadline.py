"""A wall-clock budget for blocking work, enforced with SIGALRM.

Process-pool workers run tasks on their main thread, where ``signal.setitimer``
works and interrupts pure-Python parsers (pdfminer) cleanly.  The alarm raises
``DeadlineExceeded``, a BaseException, so parser code's ``except Exception`` cannot
swallow it; the context manager turns it into ``ConversionTimeout``.  Off the main
thread (or without SIGALRM) the budget is not enforced here; the caller's own
timeout applies.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

from stages.errors import ConversionTimeout


class DeadlineExceeded(BaseException):
    """Raised by the alarm inside the block; never escapes ``deadline``."""


@contextmanager
def deadline(seconds: float | None, reason: str) -> Iterator[None]:
    """Raise ``ConversionTimeout(reason)`` if the block runs longer than ``seconds``.

    Nested use keeps the outer timer only (the inner block runs unbounded by itself).
    Code inside the block must let ``DeadlineExceeded`` propagate.
    """
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
    if not usable:
        yield
        return

    def _expired(signum, frame):
        raise DeadlineExceeded(reason)

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except DeadlineExceeded:
        raise ConversionTimeout(reason) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
