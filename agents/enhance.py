"""enhance stage: ``chunks`` → ``enhanced-chunks``.

Sets each chunk's ``embed_text``: the text itself, or a deterministic rendering of a
table (stages.enhance).  Cheap and pure, so it runs inline.
"""
from __future__ import annotations

from agents.context import StageContext
from agents.runner import Stage
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


def stage(ctx: StageContext) -> Stage:
    """enhance: one chunk at a time."""
    return Stage(STAGE, CHUNKS, enhance_one)
