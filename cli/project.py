"""``ragstream project delete P``: delete a whole project (streams/project_erasure.py).

    ragstream project delete PROJECT --yes [--json]

Revokes the project's API keys, sends a delete for every document (normalize then
removes each one's chunks, objects and content and marks it DELETED), drops every
Milvus alias and collection of the project.  Needs the stack (broker, PostgreSQL,
Milvus) and a worker for the per-document deletes to be applied.  Exit 2 without
``--yes`` or for a malformed project name.
"""
from __future__ import annotations

import asyncio
import json

import typer
from rich.console import Console

project_app = typer.Typer(help="Projects: delete one with everything it holds.", no_args_is_help=True)


async def _delete(project: str):
    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head
    from adapters.vector_store import VectorStore
    from streams.kafka_io import producer
    from streams.project_erasure import delete_project
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    settings = get_settings()
    await ensure_topics(settings.kafka_bootstrap, settings.topic_partitions, timeout_s=settings.broker_wait_s)
    await upgrade_head(settings.pg_dsn)
    store = VectorStore(settings.milvus_uri)
    try:
        async with Metadata(settings.pg_dsn) as metadata, producer(settings.kafka_bootstrap) as prod:
            return await delete_project(project, metadata=metadata, producer=prod, store=store,
                                        bucket=settings.bucket)
    finally:
        store.close()


@project_app.command("delete")
def delete(project: str = typer.Argument(..., help="the project to delete"),
           yes: bool = typer.Option(False, "--yes", help="really delete everything of the project"),
           as_json: bool = typer.Option(False, "--json", help="one JSON object")) -> None:
    """Delete every document, collection and API key of PROJECT."""
    from cli.arguments import project_or_exit

    console = Console()
    project_or_exit(project)
    if not yes:
        typer.echo(f"error: deleting project {project!r} removes all its documents: add --yes", err=True)
        raise typer.Exit(code=2)
    report = asyncio.run(_delete(project))
    if as_json:
        typer.echo(json.dumps(report.as_dict()))
        return
    console.print(f"project {project}: {report.documents_deleted} document(s) sent a delete, "
                  f"{report.already_deleted} already deleted, {report.keys_revoked} API key(s) revoked, "
                  f"dropped {', '.join(report.dropped) or 'no Milvus collection'}", highlight=False)
