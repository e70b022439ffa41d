"""Argument checks shared by the commands: a bad value is one line on stderr and
exit 2, before any service is contacted."""
from __future__ import annotations

import typer


def project_or_exit(project: str) -> str:
    """``project`` when it is a valid project name (adapters.collection_names:
    ``[A-Za-z0-9_-]{1,64}``); else ``error: …`` on stderr and ``typer.Exit(2)``."""
    from adapters.collection_names import InvalidProjectName, check_project

    try:
        return check_project(project)
    except InvalidProjectName as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
