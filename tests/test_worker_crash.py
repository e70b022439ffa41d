"""At-least-once delivery: a worker killed with SIGKILL mid-ingest loses nothing.

A second all-stages worker joins the session worker's consumer group; documents are
ingested; the second worker is killed while they are in flight.  The group
rebalances, the survivor re-reads what was not committed, and every document
completes with no duplicate chunk in Milvus.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from rich.console import Console

from tests.conftest import run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_killed_worker_loses_nothing(stack, worker, tmp_path, project):
    from adapters.vector_store import VectorStore
    from stages.samples import generate_samples
    from devstack.worker_process import start_worker, stop_worker

    files = generate_samples(tmp_path / "a")
    for i in range(4):  # distinct documents: same content, other names
        for f in generate_samples(tmp_path / f"copy{i}"):
            files.append(f.rename(f.with_name(f"copy{i}-{f.name}")))
    doomed = start_worker(stack.data_dir / "logs" / "doomed-worker.log")
    time.sleep(12)  # join the group: the partitions are now split between two workers

    from cli.progress import ingest_and_follow

    async def _ingest_then_kill():
        task = asyncio.create_task(ingest_and_follow(files, project=project, category="default",
                                                     timeout_s=600, console=Console(quiet=True)))
        await asyncio.sleep(4)
        os.killpg(doomed.pid, signal.SIGKILL)
        return await task

    try:
        outcome = run(_ingest_then_kill())
    finally:
        stop_worker(doomed)
    assert doomed.returncode == -signal.SIGKILL
    assert not outcome.timed_out
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}
    assert len(outcome.last) == len(files)
    vectors = VectorStore(stack.milvus_uri)
    for r in outcome.results:
        ids = vectors.chunk_ids_sync(project, r.document_id)
        assert len(ids) == len(set(ids)) == outcome.last[r.document_id].chunks_total
