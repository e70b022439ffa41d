"""Moves of a project's search aliases between its physical collections
(``ragstream reindex --promote / --rollback / --show``; the swap at the end of a
reindex, streams/reindex.py, goes through :func:`move_alias` too).

Every move remembers the collection the alias left in a third alias,
``{alias}__previous`` (``chunks_P__previous``, ``chunks_P__test__previous``), so that
``--rollback`` undoes exactly the last move; names and the Milvus calls are in
adapters/collection_aliases.py.

A rollback or promote first brings its target collection up to the ledger
(streams/replay.py :func:`~streams.replay.catch_up_and_move`: the target's own replay
group resumes where the collection was last filled, every current version's rows are
verified, rows of versions deleted or superseded since are pruned), moves the alias,
then copies what the live index stage wrote meanwhile.  A collection no alias searches
any more after a move (only ``__previous`` remembers it) is released from query-node
memory; a rollback to it loads it first.  A target that stays short is
refused with ReindexIncomplete naming the documents, and no alias moves: before, a
rollback dropped from search every document indexed since the alias last moved
(issue 23, failure 3).
"""
from __future__ import annotations

import asyncio
from typing import Any, Optional

from adapters import collection_aliases as ca
from adapters.vector_store import VectorStore, alias_for
from streams.replay import catch_up_and_move, replay_group
from streams.settings import Settings


async def move_alias(store: VectorStore, alias: str, collection: str) -> Optional[str]:
    """Point ``alias`` at ``collection`` and remember the collection it left in
    :func:`~adapters.collection_aliases.previous_alias`; returns that collection
    (None: a new alias)."""
    before = await asyncio.to_thread(ca.point_alias, store, alias, collection)
    if before is not None and before != collection:
        await asyncio.to_thread(ca.point_alias, store, ca.previous_alias(alias), before)
        await asyncio.to_thread(ca.release_if_unsearched, store, before)
    return before


def rollback_target(store: VectorStore, project: str, alias_name: str) -> tuple[str, str]:
    """(collection ``alias_name`` points at, collection ``--rollback`` would point it at),
    blocking.  The target is the collection the alias's last reindex swap or promote
    replaced (remembered in ``{alias}__previous``) when that still exists and differs
    from the current one; otherwise the highest physical version below the current one
    (a second rollback in a row, or collections made before the previous alias existed).
    Raises LookupError when there is no alias or nothing older to go to."""
    current = ca.alias_target(store, alias_name)
    now = ca.version_of(project, current)
    if now is None:
        raise LookupError(f"alias {alias_name} points at no versioned collection ({current!r})")
    versions = ca.physical_versions(store, project)
    remembered = ca.alias_target(store, ca.previous_alias(alias_name))
    if ca.version_of(project, remembered) in versions and remembered != current:
        return current, remembered
    older = [v for v in versions if v < now]
    if not older:
        raise LookupError(f"{current} is the oldest collection of {project!r}: nothing to roll back to")
    return current, ca.physical_name(project, max(older))


async def _caught_up(store: VectorStore, project: str, collection: str, settings: Settings,
                     move, complete_within_s: float) -> Any:
    """Bring ``collection`` (``chunks_{project}__v{n}``) up to the ledger with its own
    replay group, then ``move()`` (module docstring); returns what ``move`` returned."""
    version = ca.version_of(project, collection)
    if version is None:
        raise LookupError(f"{collection!r} is not a versioned collection of {project!r}")
    await asyncio.to_thread(ca.load, store, collection)  # released when an alias left it
    done = await catch_up_and_move(project=project, collection=collection,
                                   group=replay_group(project, version), settings=settings,
                                   store=store, move=move, complete_within_s=complete_within_s)
    return done.moved


async def rollback(project: str, *, settings: Settings, alias: str = "prod",
                   complete_within_s: float = 120.0) -> tuple[str, str]:
    """Undo the last move of ``alias`` (prod or test): bring :func:`rollback_target` up
    to the ledger, point the alias at it, then forget the remembered collection.
    Returns (from, to).  Raises LookupError when there is no alias or nothing older to
    go to, ReindexIncomplete (nothing moved) when the target stays short."""
    target = alias_for(project, alias)
    store = VectorStore(settings.milvus_uri)
    try:
        current, previous = await asyncio.to_thread(rollback_target, store, project, target)

        async def move() -> None:
            await asyncio.to_thread(ca.point_alias, store, target, previous)
            await asyncio.to_thread(ca.drop_alias, store, ca.previous_alias(target))
            await asyncio.to_thread(ca.release_if_unsearched, store, current)

        await _caught_up(store, project, previous, settings, move, complete_within_s)
        return current, previous
    finally:
        store.close()


async def promote(project: str, *, settings: Settings,
                  complete_within_s: float = 120.0) -> tuple[Optional[str], str]:
    """Point the prod alias at the test alias's collection, brought up to the ledger
    first (live writes went to prod meanwhile); returns (prod before, now).  Raises
    LookupError when the project has no test alias, ReindexIncomplete (nothing moved)
    when the test collection stays short."""
    store = VectorStore(settings.milvus_uri)
    try:
        tested = await asyncio.to_thread(ca.alias_target, store, alias_for(project, "test"))
        if tested is None:
            raise LookupError(f"project {project!r} has no test alias (ragstream reindex --alias test)")
        before = await _caught_up(store, project, tested, settings,
                                  lambda: move_alias(store, alias_for(project, "prod"), tested),
                                  complete_within_s)
        return before, tested
    finally:
        store.close()


def aliases(project: str, *, settings: Settings) -> dict[str, Any]:
    """``{"prod": collection or None, "test": …, "versions": [n, …], "rollback": {"prod":
    collection or None, "test": …}}`` (blocking); ``rollback`` names where ``--rollback``
    of that alias would go (:func:`rollback_target`; None: nowhere, it would fail)."""
    store = VectorStore(settings.milvus_uri)
    try:
        return {"prod": ca.alias_target(store, alias_for(project, "prod")),
                "test": ca.alias_target(store, alias_for(project, "test")),
                "versions": sorted(ca.physical_versions(store, project)),
                "rollback": {kind: _rollback_or_none(store, project, alias_for(project, kind))
                             for kind in ("prod", "test")}}
    finally:
        store.close()


def _rollback_or_none(store: VectorStore, project: str, alias_name: str) -> Optional[str]:
    try:
        return rollback_target(store, project, alias_name)[1]
    except LookupError:
        return None


__all__ = ["aliases", "move_alias", "promote", "rollback", "rollback_target"]
