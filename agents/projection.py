"""projection stage: the status changelog → PostgreSQL ``documents``.

Monotonic: an event whose sequence is not above the stored one changes nothing, so
duplicates, redeliveries and replays are harmless.  The write is retried for as
long as PostgreSQL is away (lag shows the backlog); the stream never moves past an
unwritten event (issue 8, failure 6).  An event PostgreSQL rejects for good (bad
data) is dead-lettered instead of blocking every document behind it.
"""
from __future__ import annotations

from agents.context import StageContext
from agents.runner import Stage
from schemas import StatusEvent
from topics import STATUS

STAGE = "projection"


async def project_one(ctx: StageContext, event: StatusEvent) -> None:
    """Write one status event into the projection (a no-op when not newer)."""
    metadata = await ctx.resources.metadata()
    await metadata.apply_status(event)


def stage(ctx: StageContext) -> Stage:
    """projection: every status event, retried until written; never fails a document."""
    return Stage(STAGE, STATUS, project_one, guard=False, fails_documents=False,
                 deadline=float("inf"))
