"""``ragstream triton serve``: the Triton Inference Server in the foreground (the
Procfile's ``triton`` process; the launcher is :mod:`devstack.triton`).
"""
from __future__ import annotations

import typer

from streams.settings import get_settings

triton_app = typer.Typer(help="The local Triton Inference Server (model repository in triton/).",
                         no_args_is_help=True)


@triton_app.command("serve")
def triton_serve() -> None:
    """Run tritonserver in the foreground on 127.0.0.1 (ports from settings); SIGTERM
    stops it and its Python-backend stubs."""
    from devstack.triton import serve

    raise typer.Exit(serve(get_settings()))
