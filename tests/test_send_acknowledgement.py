"""A record the broker did not store fails the work that sent it (agents/context.py).

Faust's ``topic.send()`` returns once the record is queued; when the produce request
later fails for good (seen: ``UnknownError`` while the embedded broker's object store
restarted, in a 30-document restart-s3 drill: 13 chunks lost, one document stuck at
INDEXING), Faust only logs it.  ``StageContext.delivered`` now checks the futures of
the current attempt's sends and raises ``RecordsNotStored`` (transient), so the runner
sends them again.  The drills show the end-to-end side; this pins the check itself
with a stand-in producer (the failure cannot be ordered from a real broker on cue).
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from agents.context import RecordsNotStored, TrackedTopic, track_sends
from agents.retry_policy import classify


class _Topic:
    """Stands in for a Faust topic: ``send`` returns the acknowledgement future."""

    def __init__(self, outcome: BaseException | None):
        self.outcome, self.topics = outcome, ("t",)

    async def send(self, **kwargs):
        fut = asyncio.get_running_loop().create_future()
        if self.outcome is None:
            fut.set_result("metadata")
        else:
            fut.set_exception(self.outcome)
        return fut


def _ctx():
    from agents.context import StageContext

    async def flush():
        return None

    app = SimpleNamespace(producer=SimpleNamespace(flush=flush))
    return StageContext(app=app, settings=None, topics=None, resources=None)


def test_a_failed_send_fails_delivered_and_is_transient():
    from aiokafka.errors import UnknownError

    async def scenario():
        ctx = _ctx()
        track_sends()
        await TrackedTopic(_Topic(None)).send(key="d", value=1)
        await TrackedTopic(_Topic(UnknownError())).send(key="d", value=2)
        with pytest.raises(RecordsNotStored) as caught:
            await ctx.delivered()
        assert "1 of 2 records not stored" in str(caught.value)
        assert classify(caught.value) == "transient"
        await ctx.delivered()  # checked once: the retry starts a fresh list

    asyncio.run(scenario())


def test_stored_sends_pass_and_other_attributes_are_the_topics():
    async def scenario():
        ctx = _ctx()
        track_sends()
        topic = TrackedTopic(_Topic(None))
        for i in range(3):
            await topic.send(key="d", value=i)
        await ctx.delivered()
        assert topic.topics == ("t",)

    asyncio.run(scenario())
