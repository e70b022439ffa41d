"""The lag gauges' idle back-off (streams/lag.py ``IdleBackoff``): an idle stage reads
its lag every ``lag_refresh_idle_s`` instead of every ``lag_refresh_s``, and any lag
or handled event brings the normal pace back at once.  No stack."""
from __future__ import annotations

from streams.lag import IdleBackoff, stage_events
from streams.metrics import STAGE_EVENTS


def test_an_idle_stage_refreshes_only_every_idle_interval():
    b = IdleBackoff(60.0)
    assert b.due(0.0, 0.0)  # never refreshed
    b.refreshed(0.0, 0.0, lag=0)
    assert not b.due(5.0, 0.0) and not b.due(59.9, 0.0)
    assert b.due(60.0, 0.0)


def test_lag_or_a_handled_event_keeps_the_normal_pace():
    b = IdleBackoff(60.0)
    b.refreshed(0.0, 3.0, lag=2)
    assert b.due(5.0, 3.0)  # lag seen last time: every tick
    b.refreshed(5.0, 3.0, lag=0)
    assert not b.due(10.0, 3.0)
    assert b.due(10.0, 4.0)  # the stage handled an event since: its input moved


def test_zero_means_every_tick():
    b = IdleBackoff(0.0)
    b.refreshed(0.0, 0.0, lag=0)
    assert b.due(0.1, 0.0)


def test_stage_events_sums_every_outcome_of_that_stage_only():
    before = stage_events("backoff-probe")
    STAGE_EVENTS.labels("backoff-probe", "ok").inc(2)
    STAGE_EVENTS.labels("backoff-probe", "skipped").inc()
    STAGE_EVENTS.labels("backoff-other", "ok").inc(5)
    assert stage_events("backoff-probe") == before + 3
