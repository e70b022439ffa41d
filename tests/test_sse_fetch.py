"""api/sse.py StatusHub keeps tailing through fetch errors (tenacity, 1 s apart) and
never retries a cancellation."""
from __future__ import annotations

import asyncio

import pytest

from api.sse import StatusHub


class FlakyConsumer:
    """getmany fails ``failures`` times with ConnectionError, then returns {}."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    async def getmany(self, timeout_ms: int) -> dict:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("broker went away")
        return {}


def test_fetch_retries_until_the_broker_answers(caplog):
    hub = StatusHub("127.0.0.1:1")
    hub._consumer = FlakyConsumer(failures=2)
    assert asyncio.run(hub._fetch()) == {}
    assert hub._consumer.calls == 3
    assert caplog.text.count("status hub: fetch failed (broker went away); retrying") == 2


def test_fetch_does_not_retry_a_cancellation():
    class Cancelled:
        calls = 0

        async def getmany(self, timeout_ms: int) -> dict:
            Cancelled.calls += 1
            raise asyncio.CancelledError

    hub = StatusHub("127.0.0.1:1")
    hub._consumer = Cancelled()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(hub._fetch())
    assert Cancelled.calls == 1
