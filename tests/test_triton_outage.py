"""The embed stage rides out a Triton outage: the server is stopped while documents
are in flight and started again; the embed client retries UNAVAILABLE with backoff,
nothing is lost, and every document completes once Triton is back."""
from __future__ import annotations

import asyncio
import time

import pytest
from rich.console import Console

from tests.conftest import run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_documents_complete_after_triton_comes_back(stack, worker, tmp_path, project):
    from stages.samples import generate_samples
    from streams import devstack
    from streams.ingest_cli import ingest_and_follow
    from streams.kafka_io import tail_status

    assert stack.embedder == "triton"
    files = generate_samples(tmp_path)

    async def _scenario():
        devstack.down(stack, names=["triton"])
        t_down = time.time()
        task = asyncio.create_task(ingest_and_follow(files, project=project, category="default",
                                                     timeout_s=300, console=Console(quiet=True)))
        await asyncio.sleep(15)  # documents reach EMBEDDING and wait there
        t_up = time.time()
        await asyncio.to_thread(devstack.up, stack, names=["triton"])
        outcome = await task
        embedding_while_down = [
            ev async for ev in tail_status(stack.kafka_bootstrap, idle_timeout_s=2.0)
            if ev.project == project and ev.status == "EMBEDDING" and t_down <= ev.at <= t_up]
        return outcome, embedding_while_down

    outcome, waited = run(_scenario())
    assert waited, "no document reached the embed stage while Triton was down"
    assert not outcome.timed_out
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}, outcome.last
    assert len(outcome.last) == len(files)
