"""The reindex catch-up gives up on a stall, not on a total (streams.replay.StallStop;
issue 27 finding 8: a fixed 120 s from the start would cut off any long replay)."""
from __future__ import annotations

from types import SimpleNamespace

from streams import replay as replay_module
from streams.replay import StallStop


class _Outcome:
    def __init__(self, result):
        self.failed = False
        self._result = result

    def result(self):
        return self._result


def _state(missing):
    return SimpleNamespace(outcome=_Outcome(missing))


def test_a_replay_that_keeps_reading_is_never_stopped(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(replay_module.time, "monotonic", lambda: clock[0])
    progress = SimpleNamespace(records=0)
    stop = StallStop(120.0, progress)
    missing = {"p.a": (1, 10, 0)}
    for _ in range(100):  # 100 polls 60 s apart: 6,000 s in all, reading all along
        clock[0] += 60
        progress.records += 1000
        assert not stop(_state(missing))


def test_rows_arriving_count_as_progress_and_a_stall_stops(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(replay_module.time, "monotonic", lambda: clock[0])
    progress = SimpleNamespace(records=500)
    stop = StallStop(120.0, progress)
    for present in range(5):  # the live stage writes rows; the replay reads nothing
        clock[0] += 100
        assert not stop(_state({"p.a": (1, 10, present)}))
    clock[0] += 100
    assert not stop(_state({"p.a": (1, 10, 4)}))  # 100 s without change
    clock[0] += 30
    assert stop(_state({"p.a": (1, 10, 4)}))  # 130 s without change
