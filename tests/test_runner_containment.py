"""agents/runner.py: an exception escaping a stage's handling (outside the retry
policy: e.g. a ledger announcement failing permanently — seen in the full suite as
a Milvus "alias already exists" while failing a version) must not crash the Faust
agent (which restarts and moves past the event, losing it silently): the event goes
to the dead-letter topic with the error, and CancelledError still propagates."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from schemas import DeadLetter
from schemas.upload import UploadEvent


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, DeadLetter]] = []

    async def send(self, key, value):
        self.sent.append((key, value))


def _runner(dead_letters: Recorder):
    from agents.runner import Stage, _Runner
    from topics import UPLOADS

    async def work(_ctx, _record):
        return None

    ctx = SimpleNamespace(settings=SimpleNamespace(document_deadline_s=5.0),
                          topics=SimpleNamespace(dead_letters=dead_letters))
    return _Runner(ctx, Stage(name="t", source=UPLOADS, work=work))


def upload_bytes(doc: str) -> bytes:
    """The raw value of an upload event of ``doc`` v3 (what the runner decodes)."""
    return UploadEvent(document_id=doc, version=3, action="upload", project="p", category="default",
                       filename="a.txt", bucket="b", key="k", sha256="0" * 64, size=1).dumps()


def test_an_escaping_error_is_dead_lettered_not_raised():
    dead = Recorder()
    runner = _runner(dead)

    async def handling():
        raise ValueError("alias 'chunks_p' already exists")

    asyncio.run(runner.contained(handling(), [(b"d1", upload_bytes("d1")),
                                              (b"d2", upload_bytes("d2")),
                                              (b"x", b"not json")]))
    assert [key for key, _ in dead.sent] == ["d1", "d2"]  # the undecodable one: handled already
    letter = dead.sent[0][1]
    assert (letter.document_id, letter.version, letter.stage, letter.reason_code) == ("d1", 3, "t", "failed")
    assert letter.error == "runner error in the t stage: ValueError: alias 'chunks_p' already exists"
    assert letter.payload["document_id"] == "d1" and letter.source_topic == "ragstream.uploads"


def test_cancellation_is_not_contained():
    runner = _runner(Recorder())

    async def handling():
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(runner.contained(handling(), [(b"d1", upload_bytes("d1"))]))


def test_success_sends_nothing():
    dead = Recorder()

    async def handling():
        return None

    asyncio.run(_runner(dead).contained(handling(), [(b"d1", upload_bytes("d1"))]))
    assert dead.sent == []
