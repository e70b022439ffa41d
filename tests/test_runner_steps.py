"""agents/runner.py, stages with a ledger step (``Stage.step``): the step's marker is
written only after the broker stored what the work sent (a marker over lost records
makes the redelivered event skip work that never reached the next topic: the
version never finishes), ``delivered()`` is waited on once per try, and an event
whose step is done is not worked on again."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from tests.test_runner_containment import upload_bytes


class _Ledger:
    def __init__(self, log: list, done: bool = False) -> None:
        self.log, self.done = log, done

    async def state(self, document_id, version):
        return SimpleNamespace(skip_reason=None)

    async def step_done(self, document_id, version, step):
        return self.done

    async def mark_step(self, document_id, version, step):
        self.log.append(f"mark_step {document_id} v{version} {step}")


def _runner(log: list, done: bool = False):
    from agents.runner import Stage, _Runner
    from topics import UPLOADS

    ledger = _Ledger(log, done)

    async def work(_ctx, record):
        log.append(f"work {record.document_id}")

    async def metadata():
        return SimpleNamespace(ledger=ledger)

    async def delivered():
        log.append("delivered")

    ctx = SimpleNamespace(settings=SimpleNamespace(document_deadline_s=5.0),
                          resources=SimpleNamespace(metadata=metadata), delivered=delivered)
    return _Runner(ctx, Stage(name="t", source=UPLOADS, work=work, step=lambda r: "t"))


def test_the_step_is_marked_once_its_records_are_stored():
    log: list = []
    asyncio.run(_runner(log).handle_one(b"d1", upload_bytes("d1")))
    assert log == ["work d1", "delivered", "mark_step d1 v3 t"]


def test_a_done_step_is_not_worked_on_again():
    log: list = []
    asyncio.run(_runner(log, done=True).handle_one(b"d1", upload_bytes("d1")))
    assert log == []
