"""One module per stage, each with a ``register(app, ctx)`` that declares its agent.

Agents stay thin: read an event, call the stage function (off the event loop),
write the next event, emit status.  ``register`` wires the chosen stages into an app.
"""
from __future__ import annotations

import importlib
from typing import Sequence

import faust

from agents.context import StageContext
from streams.settings import Settings


def register(app: faust.App, stages: Sequence[str], settings: Settings) -> StageContext:
    """Declare the agents of ``stages`` on ``app``; returns their shared context."""
    ctx = StageContext.for_app(app, settings)
    for stage in stages:
        importlib.import_module(f"agents.{stage}").register(app, ctx)
    return ctx
