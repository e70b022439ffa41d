"""stages/deadline.py: the SIGALRM budget holds even when an alarm is swallowed."""
from __future__ import annotations

import sys
import time

import pytest

from stages.deadline import deadline
from stages.errors import ConversionTimeout


def test_deadline_interrupts_the_block():
    t0 = time.monotonic()
    with pytest.raises(ConversionTimeout, match="^too slow$"):
        with deadline(0.2, "too slow"):
            time.sleep(5)
    assert time.monotonic() - t0 < 1.0


def test_a_swallowed_alarm_fires_again():
    """Parser code with a bare ``except`` (or an alarm landing in a ``__del__``) must
    not turn the budget off: the alarm repeats and interrupts the rest."""
    t0 = time.monotonic()
    with pytest.raises(ConversionTimeout):
        with deadline(0.2, "too slow"):
            try:
                time.sleep(0.5)
            except BaseException:  # noqa: BLE001 — what careless library code does
                pass
            time.sleep(5)
    assert time.monotonic() - t0 < 1.5


def test_work_that_swallows_every_alarm_still_times_out():
    """A block that ends normally after its alarm fired is still over budget."""
    with pytest.raises(ConversionTimeout):
        with deadline(0.2, "too slow"):
            end = time.monotonic() + 0.8
            while time.monotonic() < end:
                try:
                    time.sleep(0.01)
                except BaseException:  # noqa: BLE001
                    pass


def test_no_alarm_after_the_block():
    import signal

    with deadline(5, "unused"):
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    time.sleep(0.3)  # nothing fires later


class _SpinsOnDelete:
    """Its finalizer runs for ``seconds`` (or raises ``error``) when the object dies."""

    def __init__(self, seconds: float = 0.0, error: Exception | None = None):
        self.seconds, self.error = seconds, error

    def __del__(self):
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            pass
        if self.error is not None:
            raise self.error


def test_an_alarm_lost_in_a_finalizer_is_not_reported(monkeypatch):
    """Python cannot raise inside ``__del__`` and hands the exception to
    ``sys.unraisablehook`` (pytest turns that into a warning): an alarm lost there is
    expected, dropped quietly, and the refire still ends the block."""
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with pytest.raises(ConversionTimeout):
        with deadline(0.05, "too slow"):
            _SpinsOnDelete(seconds=0.5)  # dies at once; the alarm lands in its __del__
            time.sleep(5)
    assert reported == []
    assert sys.unraisablehook == reported.append  # restored after the block


def test_other_unraisable_errors_are_still_reported(monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with deadline(5, "too slow"):
        _SpinsOnDelete(error=ValueError("from a finalizer"))
    assert [type(u.exc_value) for u in reported] == [ValueError]
