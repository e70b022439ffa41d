"""agents/index.py TrailingFlush: one flush per interval per project, trailing the
last write, and a failed flush never raises into the index stage."""
from __future__ import annotations

import asyncio

from agents.index import TrailingFlush


def test_one_flush_per_interval_and_the_last_write_is_flushed():
    flushed: list[str] = []

    async def scenario() -> None:
        flusher = TrailingFlush(flushed.append, interval_s=0.2)
        for _ in range(5):
            flusher.written("p")
        flusher.written("q")
        await asyncio.sleep(0.1)
        assert flushed == []  # nothing before the interval
        await asyncio.sleep(0.3)
        assert sorted(flushed) == ["p", "q"]  # five writes to p: one flush
        flusher.written("p")  # a write after the flush schedules the next one
        await asyncio.sleep(0.4)
        assert sorted(flushed) == ["p", "p", "q"]

    asyncio.run(scenario())


def test_a_failed_flush_is_logged_not_raised(caplog):
    def broken(project: str) -> None:
        raise ConnectionError("milvus went away")

    async def scenario() -> None:
        flusher = TrailingFlush(broken, interval_s=0.05)
        flusher.written("p")
        await asyncio.sleep(0.2)
        flusher.written("p")  # still schedulable after a failure
        await asyncio.sleep(0.2)

    asyncio.run(scenario())
    assert caplog.text.count("flush of project p failed: milvus went away") == 2


def test_negative_interval_never_flushes():
    flushed: list[str] = []

    async def scenario() -> None:
        TrailingFlush(flushed.append, interval_s=-1).written("p")
        await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert flushed == []
