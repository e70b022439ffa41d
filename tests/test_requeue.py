"""``ragstream requeue`` (adapters/stranded.py) against the test stack and the session
worker: a version whose upload was consumed but whose next record was lost (as the
intermediate topics' retention loses a backlog older than 7 days) stays at its last
status; requeued, it is swept out again and completes.  A completed version is never
listed."""
from __future__ import annotations

import pytest

from tests.conftest import run
from tests.test_delivery import _terminal, _text_files, _wait_until, register_raw

pytestmark = [pytest.mark.integration]


async def _register(settings, project: str, path, document_id: str, stranded: bool) -> None:
    """Register ``path`` as version 1 and store its raw object (the outbox sweep then
    queues it).  ``stranded``: also mark it sent and normalized, as if its partition
    task had expired unread: nothing queues it any more."""
    async def strand(md, alloc) -> None:
        await md.mark_queued(document_id, alloc.version)
        await md.ledger.mark_step(document_id, alloc.version, "normalize")

    await register_raw(settings, project, path, document_id, after=strand if stranded else None)


async def _stranded(settings, project: str) -> list[tuple[str, int]]:
    from adapters.metadata import Metadata
    from adapters.stranded import stranded_versions

    async with Metadata(settings.pg_dsn) as md:
        return [(v["document_id"], v["version"]) for v in await stranded_versions(md.pool, 0, project)]


async def _requeue(settings, project: str) -> int:
    from adapters.metadata import Metadata
    from adapters.stranded import requeue, stranded_versions

    async with Metadata(settings.pg_dsn) as md:
        return await requeue(md.pool, await stranded_versions(md.pool, 0, project))


def test_a_stranded_version_is_listed_requeued_and_completes(stack, worker, tmp_path, project):
    from streams.document_ids import default_document_id, scoped_id

    stranded_doc, done_doc = _text_files(tmp_path, 2, "stranded")
    stranded_id = scoped_id(project, default_document_id(stranded_doc.name))
    done_id = scoped_id(project, default_document_id(done_doc.name))
    run(_register(stack, project, stranded_doc, stranded_id, stranded=True))
    run(_register(stack, project, done_doc, done_id, stranded=False))  # completes normally
    row = run(_wait_until(lambda: _terminal(stack, done_id), 240, "the swept version"))
    assert row["status"] == "COMPLETED"
    assert run(_stranded(stack, project)) == [(stranded_id, 1)]  # not the completed one
    assert run(_requeue(stack, project)) == 1
    row = run(_wait_until(lambda: _terminal(stack, stranded_id), 240, "the requeued version"))
    assert row["status"] == "COMPLETED" and row["version"] == 1
    assert run(_stranded(stack, project)) == []
