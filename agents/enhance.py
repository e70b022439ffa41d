"""enhance agent: ``chunks`` → ``enhanced-chunks``.

Sets each chunk's ``embed_text``: the text itself, or a deterministic rendering of a
table (stages.enhance).  Cheap and pure, so it runs inline.
"""
from __future__ import annotations

import faust

from agents.context import StageContext
from agents.failures import run_guarded
from schemas import Chunk, DocumentStatus
from stages.enhance import embed_text_for
from topics import CHUNKS

STAGE = "enhance"


async def enhance_one(ctx: StageContext, chunk: Chunk) -> None:
    """Enhance one chunk and send it on."""
    if chunk.index == 0:
        await ctx.emit(chunk, DocumentStatus.ENHANCING, stage=STAGE, chunks_total=chunk.total)
    enhanced = chunk.derive(embed_text=embed_text_for(chunk.text, chunk.element_types, chunk.table_html))
    await ctx.topics.enhanced.send(key=chunk.document_id, value=enhanced)


def register(app: faust.App, ctx: StageContext) -> None:
    """Declare the enhance agent on ``app``."""

    @app.agent(ctx.topics.chunks, name="enhance")
    async def enhance(stream: faust.StreamT[Chunk]) -> None:
        async for chunk in stream:
            await run_guarded(ctx.topics, stage=STAGE, source_topic=CHUNKS.name,
                              event=chunk, work=lambda c=chunk: enhance_one(ctx, c))
