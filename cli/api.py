"""CLI commands for the HTTP API: ``ragstream api`` and ``ragstream apikey …``.

    ragstream api [--host H --port P]            serve the API (uvicorn)
    ragstream apikey create --project P [--name N]   new key, printed on the last line
    ragstream apikey create --admin              an admin key (DELETE /v1/projects/P only)
    ragstream apikey list [--project P]          key ids, projects, dates (never keys)
    ragstream apikey revoke KEY_ID               revoke a key
    ragstream apikey secret --project P          the project's callback signing secret
    ragstream apikey secret --project P --rotate a new signing secret (the old one still
                                                 signs too for callback_secret_overlap_s)
"""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from streams.settings import get_settings

apikey_app = typer.Typer(help="Per-project API keys (stored hashed in PostgreSQL).",
                         no_args_is_help=True)
console = Console()


def api_command(host: Optional[str] = typer.Option(None, help="listen address (settings.api_host)"),
                port: Optional[int] = typer.Option(None, help="listen port (settings.api_port)"),
                workers: int = typer.Option(1, help="uvicorn worker processes"),
                log_level: str = typer.Option("info")) -> None:
    """Serve the HTTP API (uploads, status, SSE, dashboard) against the running stack."""
    import uvicorn

    from streams.log_format import logging_config

    s = get_settings()
    extra = {}
    config = logging_config(s.log_format, log_level)  # RAGSTREAM_LOG_FORMAT=json: uvicorn's lines too
    if config is not None:
        extra["log_config"] = config
    uvicorn.run("api:create_app", factory=True, host=host or s.api_host,
                port=port or s.api_port, workers=workers, log_level=log_level,
                proxy_headers=True, timeout_graceful_shutdown=10, **extra)


async def _with_db(fn):
    from adapters.api_keys import ApiKeys
    from adapters.callbacks import Callbacks
    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head

    await upgrade_head(get_settings().pg_dsn)
    async with Metadata(get_settings().pg_dsn) as md:
        keys, callbacks = ApiKeys(md.pool), Callbacks(md.pool)
        return await fn(keys, callbacks)


@apikey_app.command("create")
def create(project: Optional[str] = typer.Option(None, "--project", "-p"),
           name: str = typer.Option("", help="a label for the key"),
           admin: bool = typer.Option(False, "--admin", help="an admin key (DELETE /v1/projects/P; no project's "
                                                             "data)")) -> None:
    """Create an API key for PROJECT (or, with --admin, an admin key); the key is
    printed once, on the last line."""
    from adapters.api_keys import ADMIN_SCOPE
    from adapters.vector_store import InvalidProjectName, alias_name

    if admin == (project is not None):
        console.print("[red]give --project P or --admin[/red]")
        raise typer.Exit(2)
    if admin:
        created = asyncio.run(_with_db(lambda keys, callbacks: keys.create(ADMIN_SCOPE, name)))
        console.print(f"admin key id {created.key_id}", highlight=False)
        print(created.key, flush=True)
        return
    try:
        alias_name(project)
    except InvalidProjectName as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None

    async def go(keys, callbacks):
        await callbacks.secret(project)  # so callbacks of this project can be signed
        return await keys.create(project, name)

    created = asyncio.run(_with_db(go))
    console.print(f"key id {created.key_id} for project {project} (callback signing secret: "
                  f"ragstream apikey secret --project {project})", highlight=False)
    print(created.key, flush=True)


@apikey_app.command("list")
def list_keys(project: Optional[str] = typer.Option(None, "--project", "-p")) -> None:
    """List keys (ids, projects, dates; never the keys themselves)."""
    rows = asyncio.run(_with_db(lambda keys, _cb: keys.list(project)))
    table = Table("key id", "project", "name", "created", "last used", "revoked")
    fmt = lambda t: t.strftime("%Y-%m-%d %H:%M:%S") if t else ""  # noqa: E731
    for r in rows:
        table.add_row(r["key_id"], r["project"], r["name"], fmt(r["created_at"]),
                      fmt(r["last_used_at"]), fmt(r["revoked_at"]))
    console.print(table)


@apikey_app.command("revoke")
def revoke(key_id: str) -> None:
    """Revoke the key KEY_ID (exit 1 when there is no such active key)."""
    ok = asyncio.run(_with_db(lambda keys, _cb: keys.revoke(key_id)))
    console.print("revoked" if ok else f"[red]no active key {key_id}[/red]")
    raise typer.Exit(0 if ok else 1)


@apikey_app.command("secret")
def secret(project: str = typer.Option(..., "--project", "-p"),
           rotate: bool = typer.Option(False, "--rotate",
                                       help="make a new secret current; callbacks carry both "
                                            "signatures during the overlap window")) -> None:
    """Print PROJECT's callback signing secret (HMAC-SHA256 key), creating it if new.

    With ``--rotate``: a new random secret becomes current and is printed; for
    ``RAGSTREAM_CALLBACK_SECRET_OVERLAP_S`` seconds (default 24 h) every callback
    carries a second ``v1=`` signature made with the previous secret, so receivers
    can switch to the new one in that window.  Rotating again inside the window
    drops the oldest secret."""
    if not rotate:
        print(asyncio.run(_with_db(lambda _k, callbacks: callbacks.secret(project))))
        return
    new_secret, rotated_at = asyncio.run(_with_db(lambda _k, cb: cb.rotate_secret(project)))
    until = rotated_at + timedelta(seconds=get_settings().callback_secret_overlap_s)
    console.print(f"rotated the callback secret of {project}: callbacks are signed with the new "
                  f"and the previous secret until {until:%Y-%m-%d %H:%M:%S %Z}, then the new one "
                  f"only", highlight=False)
    print(new_secret, flush=True)


def register(app: typer.Typer) -> None:
    """Add ``api`` and ``apikey`` to the main ``ragstream`` command."""
    app.command("api", help="Serve the HTTP API (uploads, status, SSE, dashboard).")(api_command)
    app.add_typer(apikey_app, name="apikey")
