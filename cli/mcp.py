"""``ragstream mcp``: the MCP server (mcp_server/) over stdio or streamable HTTP.

    RAGSTREAM_MCP_API_KEY=KEY ragstream mcp [--root DIR]                 stdio
    RAGSTREAM_MCP_API_KEY=KEY ragstream mcp --transport http [--port P]  http://127.0.0.1:P/mcp

The server is a client of ``ragstream api`` (``RAGSTREAM_MCP_API_URL``) with one
project key, read from the environment only (an argument would show in ``ps``).
Over HTTP it listens on loopback only: the server has no authentication of its own,
so whoever reaches the port acts with its key.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

err = Console(stderr=True, soft_wrap=True)  # stdout is the stdio transport's: nothing else may write there
log = logging.getLogger("cli.mcp")


class Transport(str, Enum):
    """How MCP clients reach the server."""

    stdio = "stdio"
    http = "http"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def _probe(api) -> None:
    """Say on stderr, once at start, whether the API takes the key (the server runs
    either way: the API may come up later)."""
    from mcp_server.api_client import ApiCallFailed

    try:
        page = await api.documents(None, 1, 0)
        err.print(f"ragstream mcp: API {api.base_url} accepts the key ({page.get('total', 0)} "
                  "document(s) in its project)", highlight=False)
    except ApiCallFailed as exc:
        err.print(f"ragstream mcp: warning: {exc}", highlight=False, markup=False)


async def _serve(transport: Transport, host: str, port: int, root: Optional[Path]) -> None:
    import uvicorn

    from mcp_server.api_client import RagstreamApi
    from mcp_server.tools import build_server
    from streams.settings import get_settings

    s = get_settings()
    async with RagstreamApi(s.mcp_api_url, s.mcp_api_key.get_secret_value(), s.mcp_timeout_s) as api:
        await _probe(api)
        server = build_server(api, root, s.api_max_upload_bytes)
        if transport is Transport.stdio:
            await server.run_stdio_async()
            return
        app = server.streamable_http_app(host=host)  # loopback: DNS-rebinding protection on
        err.print(f"ragstream mcp: streamable HTTP at http://{host}:{port}/mcp", highlight=False)
        await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def mcp_command(
        transport: Transport = typer.Option(Transport.stdio, "--transport", "-t",
                                            help="stdio (a client starts this command) or http "
                                                 "(streamable HTTP at http://HOST:PORT/mcp)"),
        host: str = typer.Option("127.0.0.1", help="HTTP listen address: loopback only"),
        port: int = typer.Option(8765, help="HTTP listen port"),
        root: Optional[Path] = typer.Option(None, "--root",
                                            help="upload_file may send files under DIR only "
                                                 "(none: upload by path is off)", metavar="DIR"),
) -> None:
    """Serve ragstream's search, document status and uploads as MCP tools for the
    project of RAGSTREAM_MCP_API_KEY, through the HTTP API at RAGSTREAM_MCP_API_URL."""
    from mcp_server.path_guard import PathRefused, upload_root
    from streams.settings import get_settings

    if not get_settings().mcp_api_key.get_secret_value():
        err.print("ragstream mcp: set RAGSTREAM_MCP_API_KEY to a project's API key "
                  "(ragstream apikey create --project P); it is read from the environment only",
                  highlight=False)
        raise typer.Exit(2)
    if transport is Transport.http and not is_loopback(host):
        err.print(f"ragstream mcp: --host {host} refused: the MCP server has no authentication of "
                  "its own (whoever reaches it acts with its key), so it listens on loopback only; "
                  "put an authenticating proxy in front for remote clients", highlight=False)
        raise typer.Exit(2)
    try:
        resolved_root = upload_root(root)
    except PathRefused as exc:
        err.print(f"ragstream mcp: {exc}", highlight=False, markup=False)
        raise typer.Exit(2) from None
    logging.getLogger("httpx").setLevel(logging.WARNING)  # no line per API call
    asyncio.run(_serve(transport, host, port, resolved_root))


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the main ``ragstream`` command."""
    app.command("mcp", help="MCP server (stdio or streamable HTTP): search, status, uploads of one "
                            "project through the HTTP API.")(mcp_command)
