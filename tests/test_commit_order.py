"""Faust's commit under agent concurrency (streams/commit_order.py): the offset it
would commit for a partition's state, against the workaround's, on faust's own data
structures."""
from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
from intervaltree import IntervalTree

from streams.commit_order import in_order_new_offset

TP = ("ragstream.partition-tasks", 0)


class _Message:
    """A delivered message as faust tracks it (tp, offset, acked)."""

    def __init__(self, tp, offset):
        self.tp, self.offset, self.acked = tp, offset, False


def _consumer(acked, committed=None, pending=(), gaps=()):
    """A stand-in with faust Consumer's bookkeeping for one partition: ``acked``
    offsets done, ``committed`` (next to read, or None), ``pending`` delivered and
    still being worked on, ``gaps`` offsets never delivered."""
    tree = IntervalTree()
    for begin, end in gaps:
        tree.addi(begin, end)
    c = SimpleNamespace(_acked=defaultdict(list), _acked_index=defaultdict(set),
                        _gap=defaultdict(IntervalTree), _committed_offset=defaultdict(lambda: None),
                        _unacked_messages=[_Message(TP, o) for o in pending])
    c._acked[TP] = list(acked)
    c._acked_index[TP] = set(acked)
    c._gap[TP] = tree
    c._committed_offset[TP] = committed
    return c


def _faust(c):
    from streams.commit_order import faust_new_offset

    return faust_new_offset()(c, TP)


# (acked, committed, pending) -> the workaround's offset, faust 0.15.3's offset
CASES = [
    # the kill-workers drill: offset 1 (a long page range) parsing, 2 and 3 done
    (([2, 3], 1, [1]), None, 4),
    # nothing committed yet: offset 0 parsing, 1 done
    (([1], None, [0]), None, 2),
    # in order, nothing pending
    (([0, 1, 2], None, []), 3, 3),
    (([5, 6], 5, []), 7, 7),
    # a run that reaches an event still being worked on stops before it
    (([3, 4, 6], 3, [5]), 5, 5),
]


@pytest.mark.parametrize("state,ours,faust", CASES)
def test_commit_never_passes_an_unfinished_event(state, ours, faust):
    acked, committed, pending = state
    assert in_order_new_offset(_consumer(acked, committed, pending), TP) == ours
    assert _faust(_consumer(acked, committed, pending)) == faust  # the bug, where ours differs


def test_acked_offsets_stay_until_they_can_be_committed():
    c = _consumer([2, 3], committed=1, pending=[1])
    assert in_order_new_offset(c, TP) is None
    assert c._acked[TP] == [2, 3]
    next(iter(c._unacked_messages)).acked = True  # offset 1 done
    c._acked[TP].append(1)
    c._acked_index[TP].add(1)
    assert in_order_new_offset(c, TP) == 4
    assert c._acked[TP] == [] and c._acked_index[TP] == set()


def test_never_delivered_offsets_count_as_done():
    """Offsets the broker skipped (faust's gap tree) do not hold a commit back."""
    c = _consumer([4, 5], committed=2, gaps=[(2, 4)])
    assert in_order_new_offset(c, TP) == 6


def test_installed_by_every_stage_app(settings):
    from faust.transport.consumer import Consumer

    from streams.app import create_app

    create_app("chunk", settings)
    c = _consumer([2, 3], committed=1, pending=[1])
    assert Consumer._new_offset(c, TP) is None
