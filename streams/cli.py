"""The ``ragstream`` command line (typer + rich).

    ragstream dev up|down|status        the embedded stack (broker, S3, PostgreSQL, Milvus)
    ragstream worker [--stages S,...]   run Faust agents
    ragstream ingest PATH...            upload and queue documents, show their progress
    ragstream status [DOC] [--follow]   the status projection, or tail the changelog
    ragstream search "query"            top-k chunks with text, document and page
    ragstream partition FILE            elements of one file as JSON lines
    ragstream eval tables PDF TRUTH.csv cell accuracy of recovered tables
    ragstream profiles list|set|delete  category profiles in PostgreSQL
    ragstream dlq list|redrive          dead letters: inspect, re-send their original messages
    ragstream demo                      the whole thing on generated sample documents
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from streams.settings import get_settings

os.environ.setdefault("DO_NOT_TRACK", "1")

app = typer.Typer(help="ragstream: event-driven document ingestion for RAG.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()


def _mount() -> None:
    from streams.devstack_cli import dev_app

    from bench.cli import bench_app

    app.add_typer(dev_app, name="dev")
    app.add_typer(bench_app, name="bench")
    from streams.eval_cli import eval_app

    app.add_typer(eval_app, name="eval")  # ragstream eval tables PDF TRUTH.csv
    from streams.profiles_cli import profiles_app

    app.add_typer(profiles_app, name="profiles")  # ragstream profiles list|set|delete
    from streams.dlq_cli import dlq_app

    app.add_typer(dlq_app, name="dlq")  # ragstream dlq list|redrive
    from streams.api_cli import mount as mount_api

    mount_api(app)  # ragstream api, ragstream apikey
    try:
        from streams.partition_cli import partition_command
    except ImportError:  # parsing CLI not present in this checkout
        return
    app.command("partition", help="Partition one file and print its elements as JSON lines.")(
        partition_command)


@app.command()
def worker(stages: str = typer.Option("all", help="comma-separated stages, or 'all'"),
           loglevel: str = typer.Option("warning")) -> None:
    """Run stage workers: one stage in this process (its consumer group
    ``ragstream-<stage>``), or several/all as one supervised process per stage."""
    from streams.app import STAGES
    from streams.worker import run_worker

    chosen = list(STAGES) if stages == "all" else [s.strip() for s in stages.split(",") if s.strip()]
    raise typer.Exit(run_worker(chosen, loglevel=loglevel))


triton_app = typer.Typer(help="The local Triton Inference Server (model repository in triton/).",
                         no_args_is_help=True)
app.add_typer(triton_app, name="triton")


@triton_app.command("serve")
def triton_serve() -> None:
    """Run tritonserver in the foreground on 127.0.0.1 (ports from settings); SIGTERM
    stops it and its Python-backend stubs."""
    from streams.triton_server import serve

    raise typer.Exit(serve(get_settings()))


@app.command()
def topics() -> None:
    """Create the catalogue's topics on the broker (idempotent)."""
    from topics.admin import ensure_topics

    s = get_settings()
    created = asyncio.run(ensure_topics(s.kafka_bootstrap, s.topic_partitions))
    console.print(f"created: {created or 'none (all existed)'}")


@app.command()
def ingest(paths: List[Path] = typer.Argument(..., exists=True, help="files or folders"),
           project: str = typer.Option("default", "--project", "-p"),
           category: str = typer.Option("default", "--category", "-c"),
           document_id: Optional[str] = typer.Option(None, help="only with a single file"),
           force: bool = typer.Option(False, help="re-send unchanged files"),
           wait: bool = typer.Option(True, help="follow status until every document is terminal"),
           timeout: float = typer.Option(900.0, help="seconds to wait for terminal states")) -> None:
    """Upload files to object storage and produce their upload events."""
    from streams.ingest_cli import ingest_paths

    raise typer.Exit(asyncio.run(ingest_paths(paths, project=project, category=category,
                                              document_id=document_id, force=force, wait=wait,
                                              timeout_s=timeout, console=console)))


@app.command()
def status(document: Optional[str] = typer.Argument(None),
           follow: bool = typer.Option(False, "--follow", "-f", help="tail the status topic live"),
           project: Optional[str] = typer.Option(None, "--project", "-p")) -> None:
    """Show documents' status (PostgreSQL projection) or tail the changelog live."""
    from streams.ingest_cli import show_status

    asyncio.run(show_status(document, follow=follow, project=project, console=console))


@app.command()
def search(query: str, project: str = typer.Option("default", "--project", "-p"),
           k: int = typer.Option(5, "-k")) -> None:
    """Search a project's chunks; prints score, document, page and text."""
    from streams.ingest_cli import print_hits
    from streams.search import search as run_search

    result = asyncio.run(run_search(query, project=project, k=k, settings=get_settings()))
    print_hits(result.hits, console)
    console.print("reranked by the cross-encoder" if result.reranked
                  else f"not reranked ({result.fallback_reason}): reciprocal rank fusion of dense + lexical")


@app.command()
def demo(project: str = typer.Option("demo", "--project", "-p"),
         keep_running: bool = typer.Option(False, help="leave the stack up afterwards")) -> None:
    """Start the stack and a worker, ingest generated samples, show status and a search."""
    from streams.demo import run_demo

    raise typer.Exit(run_demo(project=project, keep_running=keep_running, console=console))


@app.command()
def drill(docs: int = typer.Option(30, help="documents per drill (mixed sizes, one split PDF)"),
          only: Optional[str] = typer.Option(None, help="comma-separated drill names (default: all)"),
          seed: int = typer.Option(1, help="seed for the corpus and the fault moments"),
          json_out: bool = typer.Option(False, "--json", help="also write a JSON report ({data_dir}/drill/report.json)"),
          outage: float = typer.Option(8.0, help="seconds a restarted service stays down"),
          timeout: float = typer.Option(900.0, help="per-drill deadline for terminal states (s)"),
          stall: float = typer.Option(150.0, help="fail a drill after this long without progress (s)")) -> None:
    """Fault drills against the embedded stack; last line drills_passed=n/m lost=… (streams/drill.py)."""
    from streams.drill import drill_main

    raise typer.Exit(drill_main(docs, only, seed, json_out, outage, timeout, stall))


def main() -> None:
    """Console-script entry point."""
    _mount()
    app()


if __name__ == "__main__":
    main()
