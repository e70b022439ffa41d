"""``ragstream db upgrade|current|revision``: the schema migrations (Alembic) by hand.

Every service upgrades the schema itself at start-up (``adapters.migrations.
upgrade_head``), so ``db upgrade`` is for an operator who wants it done before a
deploy; ``db current`` prints the database's revision and the code's head.
"""
from __future__ import annotations

import asyncio

import typer

from streams.settings import get_settings

db_app = typer.Typer(help="Schema migrations of the PostgreSQL database (Alembic).",
                     no_args_is_help=True)


@db_app.command("upgrade")
def upgrade(target: str = typer.Argument("head", help="revision to upgrade to")) -> None:
    """Upgrade the database (RAGSTREAM_PG_DSN) to TARGET; last line ``revision=<id>``."""
    from adapters.migrations import upgrade_head

    typer.echo(f"revision={asyncio.run(upgrade_head(get_settings().pg_dsn, target))}")


@db_app.command("current")
def current() -> None:
    """Print ``revision=<the database's> head=<the code's>``; exit 1 when they differ."""
    from adapters.migrations import current_revision, head_revision

    at, head = asyncio.run(current_revision(get_settings().pg_dsn)), head_revision()
    typer.echo(f"revision={at} head={head}")
    if at != head:
        raise typer.Exit(1)


@db_app.command("revision")
def revision(message: str = typer.Argument(..., help="what the revision does"),
             rev_id: str = typer.Option(..., "--id", help="revision id, e.g. 0003_add_x")) -> None:
    """Write a new empty revision file into adapters/migrations/versions/."""
    from alembic import command

    from adapters.migrations import alembic_config

    command.revision(alembic_config(), message=message, rev_id=rev_id)
