"""The ``ragstream`` command line (typer + rich): one entry point, one module per
command group in this package.

    ragstream dev up|down|status        the embedded stack            cli/dev.py
    ragstream worker [--stages S,...]   run the stage workers         cli/worker.py
    ragstream topics                    create the catalogue's topics cli/worker.py
    ragstream lag [--json]              consumer lag per partition    cli/lag.py
    ragstream ingest PATH...            upload, queue, follow         cli/ingest.py
    ragstream status [DOC] [--follow]   projection / live changelog   cli/ingest.py
    ragstream sync SOURCE -p P          folder / S3 prefix in step    cli/sync.py
    ragstream delete DOC -p P           one document                  cli/sync.py
    ragstream search "query"            top-k chunks                  cli/search.py
    ragstream reindex -p P [--rollback] replay into a new collection  cli/reindex.py
    ragstream api / apikey ...          HTTP API, per-project keys    cli/api.py
    ragstream mcp [--transport http]    MCP server over the HTTP API  cli/mcp.py
    ragstream profiles list|set|delete  category profiles             cli/profiles.py
    ragstream dlq list|redrive          dead letters                  cli/dlq.py
    ragstream project delete P --yes    a project and all it holds    cli/project.py
    ragstream partition FILE            elements of one file          cli/partition.py
    ragstream eval tables PDF TRUTH.csv table cell accuracy           cli/eval.py
    ragstream eval retrieval Q -p P     search recall@k and MRR       cli/eval.py
    ragstream eval evidence Q -p P      is each evidence in a chunk   cli/eval.py
    ragstream triton serve              Triton in the foreground      cli/triton.py
    ragstream db upgrade|current        schema migrations (Alembic)   cli/db.py
    ragstream drill                     fault drills                  cli/drill.py
    ragstream demo                      the whole thing on samples    cli/demo.py
    ragstream bench ...                 benchmarks                    bench/cli.py

Each command module keeps its heavy imports (Faust, pymilvus, ...) inside the
command functions, so ``ragstream --help`` stays quick.  Console script:
``ragstream = "cli.main:main"``; ``python -m cli`` does the same.
"""
from __future__ import annotations

import os

import typer
from rich.console import Console

os.environ.setdefault("DO_NOT_TRACK", "1")

app = typer.Typer(help="ragstream: event-driven document ingestion for RAG.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()


def _mount() -> None:
    from bench.cli import bench_app
    from cli import api, demo, drill, ingest, lag, mcp, reindex, reprocess, requeue, search, sync, worker
    from cli.db import db_app
    from cli.dev import dev_app
    from cli.dlq import dlq_app
    from cli.eval import eval_app
    from cli.partition import partition_command
    from cli.profiles import profiles_app
    from cli.project import project_app
    from cli.triton import triton_app

    worker.register(app, console)
    lag.register(app, console)
    ingest.register(app, console)
    sync.register(app, console)  # ragstream sync, ragstream delete
    search.register(app, console)
    reindex.register(app, console)
    requeue.register(app, console)  # ragstream requeue (stranded versions)
    reprocess.register(app, console)  # ragstream reprocess (new versions from the originals)
    api.register(app)  # ragstream api, ragstream apikey
    mcp.register(app)  # ragstream mcp (mcp_server/)
    demo.register(app, console)
    drill.register(app)
    app.command("partition", help="Partition one file and print its elements as JSON lines.")(
        partition_command)
    app.add_typer(dev_app, name="dev")
    app.add_typer(db_app, name="db")  # ragstream db upgrade|current|revision
    app.add_typer(triton_app, name="triton")
    app.add_typer(eval_app, name="eval")  # ragstream eval tables PDF TRUTH.csv / eval retrieval Q.jsonl -p P
    app.add_typer(profiles_app, name="profiles")  # ragstream profiles list|set|delete
    app.add_typer(dlq_app, name="dlq")  # ragstream dlq list|redrive
    app.add_typer(project_app, name="project")  # ragstream project delete P --yes
    app.add_typer(bench_app, name="bench")


def _trace_uploads() -> None:
    """Tracing for this command (``ingest``, ``api``, ``sync``: the root span of each
    version it uploads, streams/tracing.py), when RAGSTREAM_TRACING asks for it; a
    worker's stage processes configure their own (service ``ragstream-<stage>``)."""
    import sys

    from streams.settings import get_settings

    command = sys.argv[1] if len(sys.argv) > 1 else "cli"
    settings = get_settings()  # read (and checked) by _settings_or_exit already
    if settings.tracing != "off" and command != "worker":
        from streams import tracing

        tracing.configure(settings.tracing, command, settings.trace_file)


def _settings_or_exit() -> None:
    """Read the settings once, up front: a bad ``RAGSTREAM_*`` value is one line per
    problem naming the variable (never its value: it may be a secret), exit 2,
    instead of pydantic's traceback from whichever command reads them first."""
    from pydantic import ValidationError

    from streams.settings import get_settings

    try:
        get_settings()
    except ValidationError as exc:
        err = Console(stderr=True)
        for problem in exc.errors(include_input=False, include_url=False):
            name = "RAGSTREAM_" + "_".join(str(p) for p in problem["loc"]).upper() if problem["loc"] else ""
            message = problem["msg"].removeprefix("Value error, ")
            err.print(f"error: {name + ': ' if name else ''}{message}", highlight=False, markup=False,
                      soft_wrap=True)
        raise SystemExit(2) from None


def main() -> None:
    """Console-script entry point."""
    from stages.filenames import install_log_escaping

    install_log_escaping()  # file names in log records: control/bidi characters escaped
    _settings_or_exit()
    _trace_uploads()
    _mount()
    try:
        app()
    except Exception as exc:  # a service that does not answer: one line, exit 2 (cli/unreachable.py)
        from cli.unreachable import unreachable_message
        from streams.settings import get_settings

        message = unreachable_message(exc, get_settings())
        if message is None:
            raise
        Console(stderr=True).print(message, highlight=False, markup=False, soft_wrap=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
