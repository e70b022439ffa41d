"""Lag-driven scaling on one machine: how many consumer processes each stage runs.

``ragstream worker --autoscale`` (streams/worker.py ``supervise``) asks a
:class:`StageScaler` per stage every ``autoscale_interval_s`` seconds, feeding it the
stage's lag and committed-offset progress from :mod:`streams.lag`.  The decision
itself is the pure :func:`desired_consumers`; the scaler adds the cool-downs.

Every consumer process of a stage is an ordinary ``ragstream worker --stages S`` in
the stage's one group ``ragstream-S``: the broker rebalances the topic's partitions
over them, so more consumers than partitions would idle (the cap).
"""
from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Optional, Sequence

from streams.settings import Settings


def desired_consumers(lag: int, rate: Optional[float], current: int, min_n: int, max_n: int,
                      partitions: int, target_s: float) -> int:
    """Consumers a stage should run so that its backlog clears within ``target_s``.

    ``lag``: messages not yet committed; ``rate``: messages/s the ``current``
    consumers committed lately (None: not measured yet).  Bounds: at least ``min_n``,
    at most ``min(max_n, partitions)`` (a consumer beyond the partition count idles;
    the upper bound wins over ``min_n``), and never below 1 when ``min_n`` is ≥ 1.

    * no lag: ``min_n`` (idle; the caller applies its cool-down);
    * lag but no measured rate, or a rate of 0 (nothing committed lately): one more
      than ``current`` (the backlog is not moving: more hands, one at a time);
    * else ``ceil(lag / (per-consumer rate × target_s))``.
    """
    cap = max(1, min(max_n, partitions))
    floor = min(max(min_n, 0), cap)
    if lag <= 0:
        return floor
    if not rate or rate <= 0 or current <= 0:
        return max(floor, min(cap, current + 1))
    per_consumer = rate / current
    need = math.ceil(lag / (per_consumer * max(target_s, 1e-6)))
    return max(floor, min(cap, need))


@dataclass
class RateMeter:
    """Messages/s from the progress of a stage's processed position (``end - lag``
    summed over partitions) over the last ``window_s`` seconds."""

    window_s: float = 30.0
    samples: deque = field(default_factory=deque)

    def add(self, now: float, processed: int) -> None:
        self.samples.append((now, processed))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window_s:
            self.samples.popleft()

    def rate(self) -> Optional[float]:
        """Messages/s over the window; None with fewer than two samples."""
        if len(self.samples) < 2:
            return None
        (t0, p0), (t1, p1) = self.samples[0], self.samples[-1]
        return max(0.0, (p1 - p0) / (t1 - t0)) if t1 > t0 else None

    def reset(self) -> None:
        """Forget the samples (after a change of consumer count the old rate misleads)."""
        self.samples.clear()


@dataclass
class StageScaler:
    """One stage's consumer count with cool-downs around :func:`desired_consumers`.

    A change (up or down) is followed by ``up_cooldown_s`` without changes (new
    consumers join the group, the rate is measured afresh).  Scaling down waits
    until the stage has wanted fewer consumers for ``down_cooldown_s``.

    ``join_grace_s``: for this long after a change, a stage that has committed
    nothing since (rate unmeasured or 0) is taken to be joining its group, not
    stuck, and is held.  Without it the first reading after start-up (a consumer
    takes ~10 s to start and join on the embedded broker) asked for one more
    consumer, and the measured rate then asked for the rest: 1 -> 2 -> 4, two
    rebalances, each pausing every consumer of the stage (bench scale --autoscale,
    2026-12-02).
    """

    stage: str
    min_n: int
    max_n: int
    target_s: float
    up_cooldown_s: float
    down_cooldown_s: float
    current: int = 1
    join_grace_s: float = 0.0
    last_change: float = float("-inf")
    fewer_since: Optional[float] = None
    meter: RateMeter = field(default_factory=RateMeter)

    def observe(self, now: float, lag: int, processed: int, partitions: int) -> tuple[int, str]:
        """Record one lag reading; return (consumers wanted now, reason in words)."""
        self.meter.add(now, processed)
        rate = self.meter.rate()
        want = desired_consumers(lag, rate, self.current, self.min_n, self.max_n, partitions,
                                 self.target_s)
        rate_s = "unmeasured" if rate is None else f"{rate:.1f} msg/s"
        why = f"lag {lag}, {rate_s}, {self.current} consumer(s), target {self.target_s:g} s"
        if want < self.current:
            self.fewer_since = self.fewer_since if self.fewer_since is not None else now
        else:
            self.fewer_since = None
        if want == self.current:
            return self.current, why
        if not rate and lag > 0 and now - self.last_change < self.join_grace_s:
            return self.current, why + " (consumers joining)"
        if now - self.last_change < self.up_cooldown_s:
            return self.current, why + " (cooling down)"
        if want < self.current and now - self.fewer_since < self.down_cooldown_s:
            return self.current, why + f" (wants {want}; down after {self.down_cooldown_s:g} s)"
        self.current, self.last_change, self.fewer_since = want, now, None
        self.meter.reset()
        return want, why


def parse_limits(text: str) -> dict[str, tuple[int, int]]:
    """``"embed=1:4,partition=1:2"`` → ``{"embed": (1, 4), "partition": (1, 2)}``.
    Raises ValueError on a malformed entry or min > max."""
    out: dict[str, tuple[int, int]] = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        stage, _, bounds = item.partition("=")
        lo, _, hi = bounds.partition(":")
        try:
            lo_n, hi_n = int(lo), int(hi)
        except ValueError:
            raise ValueError(f"autoscale limit {item!r}: expected stage=min:max") from None
        if not stage or lo_n < 0 or hi_n < max(lo_n, 1):
            raise ValueError(f"autoscale limit {item!r}: expected stage=min:max with 0 <= min <= max, max >= 1")
        out[stage.strip()] = (lo_n, hi_n)
    return out


def scalers(stages: Sequence[str], settings: Settings) -> dict[str, StageScaler]:
    """A StageScaler per stage, bounds from ``autoscale_limits`` (else min/max).
    Each starts at its minimum (at least 1)."""
    limits = parse_limits(settings.autoscale_limits)
    out = {}
    for stage in stages:
        lo, hi = limits.get(stage, (settings.autoscale_min, max(settings.autoscale_max,
                                                                 settings.autoscale_min, 1)))
        out[stage] = StageScaler(stage, lo, hi, settings.autoscale_target_s,
                                 settings.autoscale_up_cooldown_s, settings.autoscale_cooldown_s,
                                 current=max(lo, 1), join_grace_s=settings.autoscale_join_grace_s,
                                 meter=RateMeter(window_s=max(3 * settings.autoscale_interval_s, 10.0)))
    return out


@dataclass(frozen=True)
class StageReading:
    """One lag reading of a stage: ``lag`` and ``processed`` (sum of end - lag) in
    messages over its ``partitions``, taken at ``at`` (time.monotonic())."""

    at: float
    lag: int
    processed: int
    partitions: int


class LagPoller(threading.Thread):
    """Reads every stage's lag each ``every_s`` seconds on its own event loop (the
    supervisor's loop stays synchronous); ``latest()`` hands out new readings once."""

    def __init__(self, bootstrap: str, stages: Sequence[str], every_s: float):
        super().__init__(daemon=True, name="ragstream-lag-poller")
        self.bootstrap, self.stages, self.every_s = bootstrap, list(stages), every_s
        self._lock = threading.Lock()
        self._new: dict[str, StageReading] = {}
        self._stop_event = threading.Event()
        self.error: Optional[str] = None

    def run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        from streams.lag import LagReader, stage_targets

        targets = stage_targets(self.stages)
        reader: Optional[LagReader] = None
        while not self._stop_event.is_set():
            try:
                if reader is None:
                    reader = await LagReader(self.bootstrap).__aenter__()
                rows = await asyncio.wait_for(reader.read(targets), 30)
                now = time.monotonic()
                readings = {}
                for stage in self.stages:
                    mine = [r for r in rows if r.stage == stage]
                    readings[stage] = StageReading(now, sum(r.lag for r in mine),
                                                   sum(r.end - r.lag for r in mine), len(mine))
                with self._lock:
                    self._new.update(readings)
                self.error = None
            except Exception as exc:  # noqa: BLE001 — the broker may be restarting
                self.error = f"{type(exc).__name__}: {exc}"
                if reader is not None:
                    try:
                        await reader.__aexit__(None, None, None)
                    except Exception:  # noqa: BLE001
                        pass
                    reader = None
            await asyncio.to_thread(self._stop_event.wait, self.every_s)
        if reader is not None:
            await reader.__aexit__(None, None, None)

    def latest(self) -> dict[str, StageReading]:
        """Readings not handed out before, by stage."""
        with self._lock:
            out, self._new = self._new, {}
        return out

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)
