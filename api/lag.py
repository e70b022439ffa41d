"""Per-stage consumer lag for ``/v1/stats`` and the API's /metrics: the rows of
:mod:`streams.lag` (the one module that computes lag) summed per stage, cached.

Both a stage's own group ``ragstream-<stage>`` and the all-stages group
``ragstream`` of early deployments are reported when they exist on the broker.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from streams.lag import by_stage, read_lag, stage_targets

CACHE_S = 3.0
_cache: dict[str, tuple[float, dict[str, Any]]] = {}


async def stage_lag(bootstrap: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """``{stage: {"topic", "end", "groups": {group: lag}, "lag": max over groups or
    None, "oldest_age_s": seconds or None}}`` (messages), cached for ``CACHE_S``
    seconds.  Raises ``TimeoutError`` when the broker does not answer in ``timeout_s``."""
    hit = _cache.get(bootstrap)
    if hit and time.monotonic() - hit[0] < CACHE_S:
        return hit[1]
    rows = await asyncio.wait_for(read_lag(bootstrap, stage_targets(legacy=True)), timeout_s)
    result = by_stage(rows)
    _cache[bootstrap] = (time.monotonic(), result)
    return result
