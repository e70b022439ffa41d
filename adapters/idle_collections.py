"""Release the per-project collections a process loaded and no longer uses.

Every project has its own Milvus collection (adapters/collection_names.py), and a
collection must be loaded (its segments in query-node memory) to be searched.  Loaded
once and never released, a platform with thousands of projects would hold every
project's vectors in memory for ever, most of them idle.  So each process that loads
collections (the API for searches, the index stage for writes and counts) releases the
ones it has not used for ``RAGSTREAM_MILVUS_RELEASE_IDLE_S`` seconds (default 3,600;
0 = never).  The next call on a released collection loads it again: this process's
own calls in ``VectorStore._ensure``, another process's through the "collection not
loaded" retry in ``VectorStore._call`` — so a release by one process never fails
another, it costs that process one load.

Idle is per process: the API may release a collection the index stage still writes to;
the index stage then loads it again on its next call.  Collections loaded by a CLI
process (``ragstream reindex``) outlive it; the reindex swap releases the collection it
moved an alias away from (streams/alias_moves.py).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Optional

from adapters.vector_store import VectorStore

log = logging.getLogger(__name__)

SWEEP_MAX_S = 300.0  # a sweep at least every 5 minutes, whatever the idle time


def sweep_interval(idle_s: float) -> float:
    """Seconds between sweeps for ``idle_s``: a quarter of it, within [1, 300], so a
    collection is released between ``idle_s`` and 1.25 × ``idle_s`` after its last use."""
    return min(SWEEP_MAX_S, max(1.0, idle_s / 4))


def release_idle(store: VectorStore, idle_s: float, now: Optional[float] = None) -> list[str]:
    """Release every collection ``store`` loaded and has not used for ``idle_s``
    seconds (``now``: time.monotonic(), for tests); returns the aliases released.
    Blocking (Milvus calls): run it in a thread from async code.  Raises what Milvus
    raises (the caller's next sweep tries again)."""
    now = time.monotonic() if now is None else now
    released = []
    for alias, used in sorted(store.loaded_here().items()):
        if now - used >= idle_s and store.release_sync(alias, unused_since=now - idle_s):
            log.info("released Milvus collection %s: unused here for %.0f s", alias, now - used)
            released.append(alias)
    return released


async def sweep(store: VectorStore, idle_s: float) -> None:
    """One :func:`release_idle` in a thread; a failure is logged, not raised (the next
    sweep tries again).  Called by the index stage's timer (agents/index.py) and by
    :func:`release_idle_forever` (the API)."""
    try:
        await asyncio.to_thread(release_idle, store, idle_s)
    except Exception:  # noqa: BLE001 — Milvus down: the next sweep tries again
        log.warning("releasing idle Milvus collections failed", exc_info=True)


async def release_idle_forever(store: VectorStore, idle_s: float) -> None:
    """:func:`sweep` every :func:`sweep_interval` seconds until cancelled.  Returns at
    once for ``idle_s`` 0 (never release)."""
    if idle_s <= 0:
        return
    while True:
        await asyncio.sleep(sweep_interval(idle_s))
        await sweep(store, idle_s)
