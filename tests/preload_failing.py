"""A fork-server preload whose parser warm-up fails, for tests/test_pool.py's
``test_a_failing_preload_leaves_the_pool_working``: imported by the fork server in
place of ``stages.preload_parsers`` (through ``stages.pool.PRELOAD_MODULES``), it
replaces :func:`stages.warm.warm_parsers` with one that raises (as a missing or
broken model would), then runs the real preload."""
from __future__ import annotations

import stages.warm


def _broken_warm_up() -> float:
    raise RuntimeError("model file missing (raised on purpose by tests/preload_failing.py)")


stages.warm.warm_parsers = _broken_warm_up

import stages.preload_parsers  # noqa: E402,F401 - runs the preload with the broken warm-up
