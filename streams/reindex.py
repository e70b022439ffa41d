"""Reindex a project by replaying a retained topic into a new Milvus collection, then
swap an alias to it (``ragstream reindex``).

    replay ─ embeddings (or enhanced-chunks + an embedder) ─→ chunks_P__v{n+1}
    verify ─ per document: rows of its current version == the ledger's chunk count
    swap   ─ alias chunks_P (prod) or chunks_P__test (test) → chunks_P__v{n+1}
    catch up ─ records written meanwhile, from the replay group's offsets to the new end

1. The physical collection ``chunks_P__v{n+1}`` is created (n: the project's highest
   existing version, adapters/collection_aliases.py).  Search keeps reading the old
   collection through the alias meanwhile.
2. A new consumer group ``ragstream-reindex-P-v{n+1}`` reads the topic from the
   earliest retained record (or its committed offsets: a reindex that died resumes)
   up to the end offsets taken at the start (``broker_quirks.end_offsets``), with
   partitions assigned by hand and offsets committed after each written batch.  The
   topic is ``embeddings`` (the vectors are reused) or, with ``--embedder NAME``,
   ``enhanced-chunks``, embedded again with that backend (``adapters.embedder``).
   Kept: records of project P whose version is wanted (:func:`wanted`, the same
   rules as the index stage: not deleted, not FAILED, and either the document's
   current COMPLETED version or a newer one still in flight, which the live index
   stage would complete later).  Every topic the replay reads is kept forever
   (topics/catalogue.py): replay needs the records of every current version.
3. Verification: for each document of P with a current COMPLETED version in the
   ledger, the new collection must hold that version's ``chunks`` rows.  Until it
   does (a version completing now has records past the first end offsets), the
   replay goes on to fresh end offsets, polled for up to ``complete_within_s``
   seconds; then :class:`ReindexIncomplete` is raised and no alias moves.
4. The alias moves (``alter_alias``: atomic; the old collection stays, remembered
   by the alias's ``__previous`` alias, for ``--rollback``: streams/alias_moves.py).  Then the catch-up pass
   reads from the group's offsets to new end offsets: what the live index stage
   wrote into the old collection between the first end offsets and the swap.  Last,
   rows the ledger no longer wants (a version superseded, failed or deleted during
   the run: the index stage removed those from the old collection only) are deleted
   from the new one.

Known limit: a version whose last chunks are indexed by the live stage right after
the swap, while its first chunks went to the old collection and the catch-up has not
yet copied them, counts too few rows in the new collection at that moment and is not
completed by that batch; the catch-up copies the rows, but only a redelivery of one
of its records would complete it.  The window is the few seconds between swap and
catch-up.

The replay, verification, prune and move are streams/replay.py's
:func:`~streams.replay.catch_up_and_move`, which ``--rollback`` and ``--promote`` use too.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Optional

from adapters import collection_aliases as ca
from adapters.vector_store import VectorStore, alias_for
from streams.alias_moves import move_alias
from streams.replay import ReindexIncomplete, catch_up_and_move, replay_group
from streams.settings import Settings
from topics import EMBEDDINGS, ENHANCED


@dataclass
class ReindexReport:
    """What :func:`reindex` did.  ``records_replayed``: records read (both passes);
    ``chunks_written``: rows upserted into ``collection``; ``catch_up_records``: of
    those read, how many in the catch-up pass; ``documents``: current documents
    verified; ``pruned``: rows deleted after the catch-up; ``seconds``: wall time."""

    project: str
    alias: str
    collection: str
    previous: Optional[str]
    topic: str
    group: str
    records_replayed: int = 0
    chunks_written: int = 0
    catch_up_records: int = 0
    documents: int = 0
    pruned: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def reindex(project: str, *, settings: Settings, embedder: Optional[str] = None, alias: str = "prod",
                  complete_within_s: float = 120.0) -> ReindexReport:
    """Build ``chunks_{project}__v{n+1}`` by replay, verify it, point ``alias`` ("prod"
    or "test") at it, catch up (module docstring).  ``embedder``: None to reuse the
    vectors of ``embeddings``; "onnx" or "triton" to embed ``enhanced-chunks`` again.
    Raises LookupError when the project has no collection, ReindexIncomplete when
    the new collection stays short of the ledger with no replay progress for
    ``complete_within_s`` s (streams.replay.StallStop)."""
    from adapters.embedder import create_embedder

    started = time.monotonic()
    target = alias_for(project, alias)
    store = VectorStore(settings.milvus_uri)
    emb = None
    try:
        versions = await asyncio.to_thread(ca.physical_versions, store, project)
        if not versions:
            raise LookupError(f"project {project!r} has no Milvus collection to reindex")
        new_version = max(versions) + 1
        collection = await asyncio.to_thread(ca.create_version, store, project, new_version)
        spec = EMBEDDINGS if embedder is None else ENHANCED
        if embedder is not None:
            emb = create_embedder(settings.model_copy(update={"embedder": embedder}))
        group = replay_group(project, new_version)
        report = ReindexReport(project, target, collection, None, spec.name, group)
        done = await catch_up_and_move(
            project=project, collection=collection, group=group, settings=settings, store=store,
            move=lambda: move_alias(store, target, collection), spec=spec, embedder=emb,
            complete_within_s=complete_within_s)
        report.previous = done.moved
        report.catch_up_records, report.pruned = done.after_move, done.pruned
        report.records_replayed, report.chunks_written, report.documents = done.records, done.written, done.documents
        report.seconds = time.monotonic() - started
        return report
    finally:
        if emb is not None:
            await emb.close()
        store.close()


__all__ = ["ReindexIncomplete", "ReindexReport", "reindex"]
