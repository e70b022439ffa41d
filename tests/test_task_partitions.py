"""Where a split document's page-range tasks go (agents/normalize.task_partition)."""
from __future__ import annotations

from collections import Counter

from agents.normalize import task_partition


def test_a_documents_ranges_go_round_robin_from_a_start_its_id_picks():
    parts = [task_partition("p.a1b2c3", part, 12) for part in range(30)]
    assert parts == [(parts[0] + i) % 12 for i in range(30)]
    assert parts == [task_partition("p.a1b2c3", part, 12) for part in range(30)]  # stable


def test_split_documents_do_not_all_start_on_partition_zero():
    """Issue 27, finding 7: with every split document starting at partition 0, the
    first range of each landed on one consumer; the starts now spread."""
    starts = Counter(task_partition(f"proj.doc{i}", 0, 12) for i in range(240))
    assert len(starts) == 12
    assert max(starts.values()) <= 240 // 12 * 2
