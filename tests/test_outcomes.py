"""agents/outcomes.announce: a version's terminal status event is one event however
often it is announced.  A worker killed after sending it and before marking it
announced announces again on the next delivery of that version (CI kill-workers
drill, 2026-12-02: duplicate_completions=1); the second send must be the same event
(same ``at``, same ``seq``), which the projection and the drill's checks treat as a
re-delivery, not as a second completion."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from adapters.version_ledger import Outcome
from agents.context import StageContext
from drills.checks import duplicate_completions


class _Recorder:
    def __init__(self) -> None:
        self.sent: list = []

    async def send(self, key, value):
        self.sent.append(value)


class _NoFailedParts:
    """The version's failed parts (adapters/failed_parts.py): none."""

    async def fetch(self, *args):
        return []


class _Ledger:
    def __init__(self) -> None:
        self.marked = 0
        self.pool = _NoFailedParts()

    async def mark_announced(self, document_id, version):
        self.marked += 1


class _Vectors:
    async def delete_versions_below(self, project, document_id, version):
        return None

    async def delete_version(self, project, document_id, version):
        return None


def _ctx(ledger: _Ledger, status: _Recorder) -> SimpleNamespace:
    ctx = SimpleNamespace(topics=SimpleNamespace(status=status))

    async def metadata():
        return SimpleNamespace(ledger=ledger)

    async def delivered():
        return None

    ctx.resources = SimpleNamespace(metadata=metadata, vectors=_Vectors())
    ctx.emit = lambda *a, **kw: StageContext.emit(ctx, *a, **kw)  # the real event builder
    ctx.delivered = delivered
    return ctx


def _announce_twice(outcome: Outcome) -> list:
    from agents.outcomes import announce

    ledger, status = _Ledger(), _Recorder()
    ctx = _ctx(ledger, status)
    ref = SimpleNamespace(document_id="d", version=1, project="p", filename="d.txt")
    asyncio.run(announce(ctx, ref, outcome, stage="index"))
    asyncio.run(announce(ctx, ref, outcome, stage="index"))  # the crash-healing repeat
    assert ledger.marked == 2
    return status.sent


def test_announcing_a_completion_twice_sends_the_same_event():
    sent = _announce_twice(Outcome("d", 1, "p", "COMPLETED", 3, None, False, at=1_700_000_000.5))
    assert [e.at for e in sent] == [1_700_000_000.5] * 2 and sent[0] == sent[1]
    assert duplicate_completions(sent) == {}


def test_announcing_a_failure_twice_sends_the_same_event():
    sent = _announce_twice(Outcome("d", 1, "p", "FAILED", 0, "[corrupt] bad file", False, at=42.0))
    assert [e.at for e in sent] == [42.0, 42.0] and sent[0] == sent[1]
    assert sent[0].status == "FAILED" and sent[0].error_code == "corrupt"
