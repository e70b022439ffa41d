"""The embed stage rides out a Triton outage: the server is stopped while documents
are in flight and started again; the embed client retries UNAVAILABLE with backoff,
nothing is lost, and every document completes once Triton is back."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest
from rich.console import Console

from tests.conftest import ROOT, WORKER_METRICS_PORT, ingest, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_documents_complete_after_triton_comes_back(stack, worker, tmp_path, project):
    from stages.samples import generate_samples
    import devstack
    from cli.progress import ingest_and_follow
    from streams.kafka_io import status_history, tail_status

    assert stack.embedder == "triton"
    files = generate_samples(tmp_path)

    async def _scenario():
        # earlier tests embedded these same samples: with their vectors in the embedding
        # cache the embed stage would never call Triton, so the cache starts empty
        from adapters.embedding_cache import EmbeddingCache
        from adapters.metadata import Metadata
        from adapters.migrations import upgrade_head

        await upgrade_head(stack.pg_dsn)  # this test may be the first to touch the database
        async with Metadata(stack.pg_dsn) as metadata:
            await EmbeddingCache(metadata.pool).clear()
        devstack.down(stack, names=["triton"])
        t_down = time.time()
        task = asyncio.create_task(ingest_and_follow(files, project=project, category="default",
                                                     timeout_s=300, console=Console(quiet=True)))
        # documents reach EMBEDDING and wait there (however slow the stages before it)
        async for ev in tail_status(stack.kafka_bootstrap, idle_timeout_s=180.0):
            if ev.project == project and ev.status == "EMBEDDING":
                break
        await asyncio.sleep(5)
        t_up = time.time()
        await asyncio.to_thread(devstack.up, stack, names=["triton"])
        outcome = await task
        embedding_while_down = [
            ev for ev in await status_history(stack.kafka_bootstrap)
            if ev.project == project and ev.status == "EMBEDDING" and t_down <= ev.at <= t_up]
        return outcome, embedding_while_down

    outcome, waited = run(_scenario())
    assert waited, "no document reached the embed stage while Triton was down"
    assert not outcome.timed_out
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}, outcome.last
    assert len(outcome.last) == len(files)
    # the worker's /metrics show the retries and the batches that went through
    from streams.worker import stage_metrics_port

    port = stage_metrics_port(WORKER_METRICS_PORT, "embed")  # the embed stage's process
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    # the stage runner retried the batches (the Triton client itself does not retry
    # in a worker: retries must not nest)
    retries = [l for l in metrics.splitlines()
               if l.startswith('ragstream_stage_events_total{outcome="retried",stage="embed"}')]
    assert retries and float(retries[0].split()[-1]) > 0, retries
    assert "ragstream_triton_batch_size_bucket" in metrics
    assert 'ragstream_stage_events_total{outcome="ok",stage="embed"}' in metrics


def test_search_without_triton_falls_back_within_its_deadline(stack, worker, tmp_path, project):
    """With Triton stopped, search still answers: the query is embedded in process and
    the candidates are ordered by RRF, flagged as not reranked, within the deadline."""
    from stages.samples import generate_samples
    import devstack
    from search.query import search

    outcome = ingest(generate_samples(tmp_path)[:1], project)
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}
    weights = tmp_path / "reranker"
    subprocess.run([sys.executable, str(ROOT / "triton" / "export_reranker.py"), "--tiny-random",
                    "--output-dir", str(weights)], check=True, capture_output=True, timeout=300)
    settings = stack.model_copy(update={"reranker_dir": weights})
    devstack.down(stack, names=["triton"])
    try:
        t0 = time.perf_counter()
        result = run(search("plant energy use", project=project, k=3, settings=settings))
        elapsed = time.perf_counter() - t0
    finally:
        devstack.up(stack, names=["triton"])
    assert result.hits and not result.reranked and result.fallback_reason
    assert result.extra["query_embedder"] == "onnx"
    assert elapsed < 30, elapsed  # query deadline 2 s + reranker deadline 2 s + model load
