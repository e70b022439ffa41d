"""``ragstream demo``: the whole pipeline on the project's own sample documents.

Starts the embedded stack and one all-stages worker, generates the samples (a
multi-page PDF with headings, a ruled table and an image; a DOCX; an HTML page),
ingests them while printing every status transition, runs a search, and prints
``{"completed": N, "failed": M, "search_hits": K}`` as its last line.
"""
from __future__ import annotations

import asyncio
import json
import time

import typer
from rich.console import Console

import devstack
from devstack.worker_process import start_worker, stop_worker
from streams.settings import get_settings

DEMO_QUERY = "energy use per megalitre at each treatment plant"


async def _prior_status(results, settings) -> dict[str, str]:
    """Projected status of files skipped as unchanged (a re-run of the demo)."""
    from adapters.metadata import Metadata

    async with Metadata(settings.pg_dsn) as md:
        out = {}
        for r in results:
            if not r.queued:
                row = await md.get_document(r.document_id)
                out[r.document_id] = row["status"] if row else "UNKNOWN"
        return out


def run_demo(project: str, keep_running: bool, console: Console) -> int:
    """Run the demo; returns the exit code (0 when every sample completed and the
    search found hits)."""
    from stages.samples import generate_samples
    from cli.progress import ingest_and_follow
    from cli.search import print_hits
    from search.query import search
    from topics.admin import ensure_topics

    settings = get_settings()
    t0 = time.time()
    console.rule("starting the embedded stack")
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    worker = start_worker(settings.data_dir / "logs" / "worker.log")
    completed, failed, hits, samples = 0, 0, [], []
    try:
        console.rule("ingesting sample documents")
        samples = generate_samples(settings.data_dir / "samples")
        outcome = asyncio.run(ingest_and_follow(samples, project=project, category="default",
                                                timeout_s=600, console=console))
        prior = asyncio.run(_prior_status(outcome.results, settings))
        completed = outcome.count("COMPLETED") + sum(s == "COMPLETED" for s in prior.values())
        failed = outcome.count("FAILED") + sum(s == "FAILED" for s in prior.values())
        if worker.poll() is not None:
            console.print(f"[red]worker exited with {worker.returncode}; see its log[/red]")
        console.rule(f"search: {DEMO_QUERY!r}")
        result = asyncio.run(search(DEMO_QUERY, project=project, k=3, settings=settings))
        hits = result.hits
        print_hits(hits, console)
        console.print("reranked by the cross-encoder" if result.reranked
                      else f"not reranked ({result.fallback_reason}): RRF of dense + lexical rankings")
        console.print(f"demo took {time.time() - t0:.1f} s")
    except Exception:  # noqa: BLE001 — show it, then still end with the JSON summary
        console.print_exception()
        hits, samples = [], samples or [None]
    finally:
        stop_worker(worker)
        if not keep_running:
            devstack.down(settings)
    print(json.dumps({"completed": completed, "failed": failed, "search_hits": len(hits)}))
    return 0 if completed == len(samples) and hits else 1


def register(app: typer.Typer, console: Console) -> None:
    """Add ``demo`` to the main ``ragstream`` command."""

    @app.command()
    def demo(project: str = typer.Option("demo", "--project", "-p"),
             keep_running: bool = typer.Option(False, help="leave the stack up afterwards")) -> None:
        """Start the stack and a worker, ingest generated samples, show status and a search."""
        raise typer.Exit(run_demo(project=project, keep_running=keep_running, console=console))
