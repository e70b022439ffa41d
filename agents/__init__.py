"""One module per stage: a :class:`agents.runner.Stage` declaration plus its work.

The runner (agents/runner.py) does what every stage shares — decoding, the ledger
guard, retries, dead letters, failing a version, metrics — so a stage module holds
only what is particular to it.  ``register`` wires one stage into an app.
"""
from __future__ import annotations

import importlib

import faust

from agents.context import StageContext
from agents.runner import declare
from streams.settings import Settings


def register(app: faust.App, stage: str, settings: Settings) -> StageContext:
    """Declare ``stage``'s agent (and its timers) on ``app``; returns the context."""
    module = importlib.import_module(f"agents.{stage}")
    sizing = getattr(module, "pool_workers", None)  # a stage that parses more at once
    bulk = getattr(module, "bulk_pool_workers", None)  # of them, niced for bulk-lane work
    preload = getattr(module, "pool_preload", False) and settings.warm_parsers
    ctx = StageContext.for_app(app, settings, pool_workers=sizing(settings) if sizing else None,
                               pool_preload=preload, bulk_workers=bulk(settings) if bulk else 0)
    declare(app, ctx, module.stage(ctx))
    if hasattr(module, "extras"):
        module.extras(app, ctx)
    return ctx
