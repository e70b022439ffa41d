"""The autoscaler's pure parts (streams/autoscale.py): the policy, the rate meter,
the cool-downs and the limits setting.  No stack needed."""
from __future__ import annotations

import pytest

from streams.autoscale import RateMeter, StageScaler, desired_consumers, parse_limits


@pytest.mark.parametrize("lag, rate, current, lo, hi, parts, target, want", [
    (0, 5.0, 3, 1, 4, 4, 30, 1),        # idle: back to the minimum
    (0, None, 1, 0, 4, 4, 30, 0),       # min 0 allowed
    (600, 10.0, 1, 1, 8, 4, 30, 2),     # 600 msgs at 10/s per consumer: 2 clear it in 30 s
    (6000, 10.0, 1, 1, 8, 4, 30, 4),    # would need 20: capped by the partition count
    (6000, 10.0, 1, 1, 3, 4, 30, 3),    # capped by max
    (100, 40.0, 4, 1, 4, 4, 30, 1),     # 10/s per consumer, 100 msgs: 1 is enough
    (50, None, 1, 1, 4, 4, 30, 2),      # unmeasured with lag: one more
    (50, 0.0, 2, 1, 4, 4, 30, 3),       # stuck: one more
    (50, 0.0, 4, 1, 4, 4, 30, 4),       # stuck at the cap: stays
    (10, 1.0, 1, 2, 4, 1, 30, 1),       # one partition: the cap beats min
])
def test_desired_consumers(lag, rate, current, lo, hi, parts, target, want):
    assert desired_consumers(lag, rate, current, lo, hi, parts, target) == want


def test_rate_meter_window():
    m = RateMeter(window_s=10)
    assert m.rate() is None
    m.add(0, 0)
    m.add(5, 50)
    assert m.rate() == 10
    for t in range(10, 60, 5):
        m.add(t, 50 + (t - 5) * 2)  # 2 msg/s from t=5 on
    assert m.rate() == pytest.approx(2.0)
    assert m.samples[-1][0] - m.samples[0][0] <= 15


def test_scaler_cooldowns():
    sc = StageScaler("embed", 1, 4, target_s=10, up_cooldown_s=20, down_cooldown_s=60,
                     meter=RateMeter(window_s=10))
    sc.last_change = 0.0  # consumers just started
    # lag, nothing measured, within the cool-down after start: holds
    assert sc.observe(5, lag=1000, processed=0, partitions=4)[0] == 1
    assert sc.observe(10, lag=990, processed=10, partitions=4)[0] == 1
    # after the cool-down: 2 msg/s for one consumer, 980 left, 10 s target → cap 4
    n, why = sc.observe(20, lag=980, processed=30, partitions=4)
    assert n == 4 and "lag 980" in why
    # drained: wants 1, but only after 60 s of wanting fewer
    assert sc.observe(45, lag=0, processed=1010, partitions=4)[0] == 4
    assert sc.observe(80, lag=0, processed=1010, partitions=4)[0] == 4
    assert sc.observe(106, lag=0, processed=1010, partitions=4)[0] == 1
    # a short blip of lag resets the wait for scaling down
    sc2 = StageScaler("embed", 1, 4, 10, 0, 60, current=3)
    sc2.observe(0, 0, 0, 4)
    sc2.observe(30, 5000, 0, 4)  # lag again (unmeasured → wants more, caps at 4)
    assert sc2.current == 4


def test_scaler_waits_for_joining_consumers():
    """Right after start-up nothing is committed while the first consumer joins its
    group: that is not a stuck backlog, so no "one more" (which, with the rate
    measured a moment later, made 1 -> 2 -> 4: two rebalances).  Once the rate is
    measured it goes straight to what the lag needs; nothing committed past the
    grace is stuck, and gets one more."""
    sc = StageScaler("embed", 1, 4, target_s=10, up_cooldown_s=8, down_cooldown_s=60,
                     join_grace_s=20, meter=RateMeter(window_s=10))
    sc.last_change = 0.0
    n, why = sc.observe(9, lag=1000, processed=0, partitions=4)
    assert n == 1 and "joining" in why
    assert sc.observe(11, lag=1000, processed=0, partitions=4)[0] == 1
    assert sc.observe(13, lag=980, processed=20, partitions=4)[0] == 4  # 5 msg/s: needs 20, cap 4
    stuck = StageScaler("embed", 1, 4, target_s=10, up_cooldown_s=8, down_cooldown_s=60,
                        join_grace_s=20, meter=RateMeter(window_s=10))
    stuck.last_change = 0.0
    assert stuck.observe(10, lag=50, processed=0, partitions=4)[0] == 1
    assert stuck.observe(21, lag=50, processed=0, partitions=4)[0] == 2


def test_parse_limits():
    assert parse_limits("embed=1:4, partition=0:2") == {"embed": (1, 4), "partition": (0, 2)}
    assert parse_limits("") == {}
    for bad in ("embed=4:1", "embed", "embed=a:b", "embed=0:0"):
        with pytest.raises(ValueError):
            parse_limits(bad)
