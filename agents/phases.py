"""Where a stage's time for one event (or batch) goes, for its "done" log line.

The runner (agents/runner.py) opens a tally per event or batch (:func:`begin`) and
adds the seconds of each phase as it ends (:func:`add`):

- ``open``: decoding the record and opening its sealed content (the data key from
  PostgreSQL, schemas/sealing.py);
- ``guard``: the ledger reads that decide whether the version is still wanted and the
  step not done yet (PostgreSQL);
- ``work``: the stage's own work (its object-store reads and writes, parsing,
  embedding, Milvus), up to the moment its records are queued in the producer;
- ``stored``: waiting until the broker acknowledged those records (agents/context.py
  ``delivered``: with the embedded broker, its writes to the object store);
- ``marked``: the ledger marker written after them (PostgreSQL).

Retries add to the same phases; ``open`` comes before the line's own seconds (which
start at the guard).  Seconds from ``time.perf_counter``.  The tally lives
in a context variable, so concurrent events of one stage (its ``concurrency``) each
keep their own.
"""
from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Optional

_TALLY: ContextVar[Optional[dict[str, float]]] = ContextVar("stage_phases", default=None)
ORDER = ("open", "guard", "work", "stored", "marked")


def begin() -> float:
    """Start an empty tally in the current context; returns the start time (s)."""
    _TALLY.set({})
    return time.perf_counter()


def add(phase: str, since: float) -> float:
    """Add the seconds from ``since`` to now to ``phase`` of the current tally (none
    open: nothing); returns now, the start of the next phase."""
    now = time.perf_counter()
    tally = _TALLY.get()
    if tally is not None:
        tally[phase] = tally.get(phase, 0.0) + now - since
    return now


def summary() -> str:
    """The current tally as ``"open 0.01, guard 0.02, work 0.20, stored 0.05 s"``
    (phases in :data:`ORDER` that ran; "" when none)."""
    tally = _TALLY.get() or {}
    parts = [f"{name} {tally[name]:.2f}" for name in ORDER if name in tally]
    return ", ".join(parts) + " s" if parts else ""
