"""project agent: the status changelog → PostgreSQL ``documents`` (the projection).

Monotonic: an event whose sequence is not above the stored one changes nothing, so
duplicates, redeliveries and replays are harmless.
"""
from __future__ import annotations

import faust

from agents.context import StageContext
from schemas import StatusEvent

STAGE = "project"


def register(app: faust.App, ctx: StageContext) -> None:
    """Declare the status projection agent on ``app``."""

    @app.agent(ctx.topics.status, name="project-status")
    async def project_status(stream: faust.StreamT[StatusEvent]) -> None:
        async for event in stream:
            metadata = await ctx.resources.metadata()
            await metadata.apply_status(event)
