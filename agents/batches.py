"""Shared by the batched agents (embed, index): run a batch, fail its documents."""
from __future__ import annotations

from typing import Awaitable, Callable, Sequence

from agents.context import StageContext
from agents.failures import run_guarded


class _BatchRef:
    """Stands for one document of a failed batch in run_guarded's bookkeeping."""

    def __init__(self, chunk):
        self.document_id, self.version = chunk.document_id, chunk.version
        self.project, self.filename = chunk.project, chunk.filename
        self.callback_url = chunk.callback_url
        self._chunk = chunk

    def asdict(self) -> dict:
        return self._chunk.asdict()


async def run_batch(ctx: StageContext, *, stage: str, source_topic: str, batch: Sequence,
                    work: Callable[[Sequence], Awaitable[None]]) -> None:
    """Run ``work(batch)`` with retries; if it still fails, retry each document's
    chunks alone so one bad document fails by itself and the rest go through."""
    first = _BatchRef(batch[0])
    ok = await run_guarded(ctx.topics, stage=stage, source_topic=source_topic, event=first,
                           work=lambda: work(batch), fail=False)
    if ok:
        return
    by_doc: dict[tuple[str, int], list] = {}
    for chunk in batch:
        by_doc.setdefault((chunk.document_id, chunk.version), []).append(chunk)
    for chunks in by_doc.values():
        await run_guarded(ctx.topics, stage=stage, source_topic=source_topic,
                          event=_BatchRef(chunks[0]), work=lambda c=chunks: work(c))
