"""agents/phases.py: the per-event tally behind the "done" log line."""
from __future__ import annotations

import asyncio

from agents import phases


def test_phases_add_up_in_order_and_each_task_keeps_its_own():
    async def one(work_s: float) -> str:
        since = phases.begin()
        since = phases.add("guard", since)
        await asyncio.sleep(work_s)
        since = phases.add("work", since)
        phases.add("work", since)  # a retry adds to the same phase
        return phases.summary()

    async def both() -> list[str]:
        return await asyncio.gather(one(0.05), one(0.25))

    fast, slow = asyncio.run(both())
    assert fast.startswith("guard 0.00, work 0.0") and fast.endswith(" s")
    assert slow.startswith("guard 0.00, work 0.2")


def test_no_tally_open_means_an_empty_summary():
    async def bare() -> str:
        phases.add("work", 0.0)  # nothing open in this context: ignored
        return phases.summary()

    assert asyncio.run(bare()) == ""
