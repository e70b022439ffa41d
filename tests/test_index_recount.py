"""agents/index.recount: the count of a version whose last chunk is stored is asked
again until it reaches the total; still short after the last wait, the version fails
with the counts in its reason instead of staying INDEXING (the stale Milvus Lite
count of 2026-12-03, tests/test_milvus_lite_flush.py)."""
from __future__ import annotations

import asyncio

import pytest

from agents.index import RECOUNT_WAITS_S, recount
from agents.retry_policy import classify
from stages.errors import InternalError


def _counts(*values: int):
    """An async count() answering ``values`` in turn (the last one from then on)."""
    answers = list(values)

    async def count() -> int:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return count


def test_a_stale_count_is_asked_again_until_it_reaches_the_total():
    assert asyncio.run(recount(_counts(0, 16), total=16, first=0, waits=(0, 0, 0))) == 16
    assert asyncio.run(recount(_counts(12, 12, 16), total=16, first=0, waits=(0, 0, 0))) == 16


def test_a_count_that_stays_short_fails_the_version_with_its_counts():
    with pytest.raises(InternalError) as failed:
        asyncio.run(recount(_counts(12), total=16, first=10, waits=(0, 0, 0)))
    assert "only 12 of 16 chunks" in failed.value.reason and "4 times" in failed.value.reason
    assert classify(failed.value) == "permanent"


def test_the_default_waits_are_bounded():
    assert len(RECOUNT_WAITS_S) >= 3 and sum(RECOUNT_WAITS_S) <= 10
