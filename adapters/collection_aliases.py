"""Physical collections and aliases of a project in Milvus, for reindexing.

A project's chunks live in physical collections ``chunks_{project}__v{n}``
(n = 1, 2, …; ``{project}`` is the injective encoding of adapters/collection_names.py,
so no project's names are another's); what readers and the index stage use is an alias in front of one of
them: ``prod`` = ``chunks_{project}`` (ingestion writes through it, search reads
it), ``test`` = ``chunks_{project}__test`` (only ``ragstream reindex --alias test``
moves it, ``ragstream search --alias test`` reads it).  ``adapters.vector_store``
``alias_for`` spells both.  A reindex builds ``v{n+1}`` beside the others and moves
an alias with :func:`point_alias` (Milvus ``alter_alias``: one metadata change, so a
search sees the old or the new collection, never neither; measured on Milvus Lite
3.2, ``tests/test_reindex.py``).  Old versions are kept for rollback; the collection
an alias left at its last move is remembered by a third alias,
:func:`previous_alias` (``chunks_{project}__previous``, ``chunks_{project}__test__previous``).

Every expression sent to a collection carries the project's term
(``vector_store.scoped_filter``): the second wall behind the collection name.

Every function runs through the store's reconnecting wrapper
(``VectorStore.run_sync``) and blocks: call it in a thread from async code.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional, Sequence, TypeVar

from adapters.collection_names import with_suffix
from adapters.vector_store import (VectorStore, alias_name, collection_fields, create_chunk_collection,
                                   has_alias, scoped_filter, storable_rows)

T = TypeVar("T")


def physical_name(project: str, version: int) -> str:
    """``chunks_{project}__v{version}`` (the project encoded: collection_names.py)."""
    return with_suffix(alias_name(project), f"v{int(version)}")


def physical_versions(store: VectorStore, project: str) -> dict[int, str]:
    """``{n: "chunks_{project}__v{n}"}`` for every physical collection of the project."""
    pattern = re.compile(re.escape(with_suffix(alias_name(project), "v")) + r"(\d+)")
    names = store.run_sync("list_collections", lambda c: c.list_collections())
    return {int(m.group(1)): name for name in names if (m := pattern.fullmatch(name))}


def alias_target(store: VectorStore, alias: str) -> Optional[str]:
    """The physical collection ``alias`` points at, or None when there is no such alias."""
    def target(client) -> Optional[str]:
        if not has_alias(client, alias):
            return None
        return client.describe_alias(alias)["collection_name"]

    return store.run_sync("describe_alias", target)


def version_of(project: str, collection: Optional[str]) -> Optional[int]:
    """n of ``chunks_{project}__v{n}``; None for None or another name."""
    m = re.fullmatch(re.escape(with_suffix(alias_name(project), "v")) + r"(\d+)", collection or "")
    return int(m.group(1)) if m else None


def create_version(store: VectorStore, project: str, version: int) -> str:
    """Create (if missing) and load ``chunks_{project}__v{version}``; returns its name."""
    name = physical_name(project, version)

    def create(client) -> str:
        create_chunk_collection(client, name, index_type=store.index_type)
        client.load_collection(name, timeout=store.timeout_s)
        return name

    return store.run_sync("create_collection", create)


def point_alias(store: VectorStore, alias: str, collection: str) -> Optional[str]:
    """Point ``alias`` at ``collection`` (loaded first, so the first search after the
    swap does not wait for a load): ``alter_alias`` when it exists, else
    ``create_alias``.  Returns the collection it pointed at before (None: new alias)."""
    def swap(client) -> Optional[str]:
        client.load_collection(collection, timeout=store.timeout_s)
        if has_alias(client, alias):
            before = client.describe_alias(alias)["collection_name"]
            if before != collection:
                client.alter_alias(collection, alias)
            return before
        client.create_alias(collection, alias)
        return None

    return store.run_sync("alter_alias", swap)


def previous_alias(alias: str) -> str:
    """``{alias}__previous``: the alias that remembers the collection ``alias`` pointed at
    before its last move by a reindex swap or a promote, so that ``ragstream reindex
    --rollback`` undoes exactly that move (``streams.alias_moves.rollback``)."""
    return with_suffix(alias, "previous")


def load(store: VectorStore, collection: str) -> None:
    """Load ``collection`` (a no-op when loaded): before reading a collection that
    :func:`release_if_unsearched` may have released (a rollback's target)."""
    store.run_sync("load_collection", lambda c: c.load_collection(collection, timeout=store.timeout_s))


def release_if_unsearched(store: VectorStore, collection: str) -> bool:
    """Release ``collection`` when no alias searches it any more — only
    :func:`previous_alias` names (kept for a rollback, which loads it again first:
    :func:`point_alias`) or none point at it; returns whether it was released.  Without
    this a collection an alias moved away from stayed loaded (in query-node memory)
    for ever (adapters/idle_collections.py releases the searched ones when idle)."""
    def release(client) -> bool:
        aliases = client.list_aliases(collection, timeout=store.timeout_s)
        aliases = aliases.get("aliases", []) if isinstance(aliases, dict) else list(aliases)
        if any(not a.endswith(previous_alias("")) for a in aliases):
            return False
        client.release_collection(collection, timeout=store.timeout_s)
        return True

    return store.run_gated("release", release)


def drop_alias(store: VectorStore, alias: str) -> None:
    """Remove ``alias`` when it exists (the collection it points at stays)."""
    def drop(client) -> None:
        if has_alias(client, alias):
            client.drop_alias(alias)

    store.run_sync("drop_alias", drop)


def upsert_rows(store: VectorStore, collection: str, rows: Sequence[dict[str, Any]]) -> int:
    """Upsert chunk rows (``VectorStore.upsert_sync``'s keys) into one physical
    collection; returns the row count."""
    if not rows:
        return 0

    def upsert(c) -> None:
        fitted = storable_rows(rows, collection_fields(c, collection, store.timeout_s))
        c.upsert(collection, fitted, timeout=store.timeout_s)

    store.run_gated("upsert", upsert)
    return len(rows)


def delete_where(store: VectorStore, project: str, collection: str, expr: str) -> None:
    """Delete the rows of ``project`` in ``collection`` matching the Milvus expression
    ``expr`` (the project term is added: :func:`vector_store.scoped_filter`)."""
    flt = scoped_filter(project, expr)

    store.run_gated("delete", lambda c: while_loaded(
        c, collection, store.timeout_s, lambda: c.delete(collection, filter=flt, timeout=store.timeout_s)))


def is_loaded(client, collection: str, timeout_s: Optional[float] = None) -> bool:
    """Whether Milvus has ``collection`` loaded (pymilvus ``get_load_state``)."""
    from pymilvus.client.types import LoadState

    return client.get_load_state(collection, timeout=timeout_s)["state"] == LoadState.Loaded


def while_loaded(client, collection: str, timeout_s: Optional[float], call: Callable[[], T]) -> T:
    """``call()`` with ``collection`` loaded: queries and filtered deletes need it.  One
    released (:func:`release_if_unsearched`) is loaded for the call and released again,
    so erasing from or reading an old collection does not keep it in memory."""
    released = not is_loaded(client, collection, timeout_s)
    if released:
        client.load_collection(collection, timeout=timeout_s)
    try:
        return call()
    finally:
        if released:
            client.release_collection(collection, timeout=timeout_s)


def query_rows(store: VectorStore, collection: str, flt: str, output_fields: Sequence[str],
               **kwargs: Any) -> list[dict[str, Any]]:
    """The rows of physical ``collection`` matching the Milvus filter ``flt`` (Strong:
    writes acknowledged before the call are seen), loaded for the call when released
    (:func:`while_loaded`); ``kwargs`` go to pymilvus ``query`` (e.g. ``limit``).  For
    reading any collection of a project, searched or not (erasure checks, drills)."""
    return store.run_sync("query", lambda c: while_loaded(c, collection, store.timeout_s, lambda: c.query(
        collection, filter=flt, output_fields=list(output_fields), consistency_level="Strong", **kwargs)))


def iterate_rows(store: VectorStore, collection: str, flt: str, output_fields: Sequence[str],
                 batch: int = 4096) -> list[dict[str, Any]]:
    """Every row of ``collection`` (a physical name or an alias) matching the Milvus
    filter ``flt``, read with a query iterator ``batch`` rows a page (no cap on the
    count, unlike :func:`query_rows`), Strong consistency (writes acknowledged before
    the call are seen), loaded for the call when released (:func:`while_loaded`)."""
    def read(client) -> list[dict[str, Any]]:
        return while_loaded(client, collection, store.timeout_s, lambda: iterate(client))

    def iterate(client) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        it = client.query_iterator(collection, batch_size=batch, filter=flt,
                                   output_fields=list(output_fields),
                                   consistency_level="Strong", timeout=store.timeout_s)
        try:
            while rows := it.next():
                out += rows
        finally:
            it.close()
        return out

    return store.run_sync("query_iterator", read)


def chunk_versions(store: VectorStore, project: str, collection: str,
                   batch: int = 4096) -> dict[str, tuple[str, int]]:
    """``{chunk_id: (document_id, version)}`` of every row of ``project`` in
    ``collection`` (:func:`iterate_rows`)."""
    rows = iterate_rows(store, collection, scoped_filter(project), ["chunk_id", "document_id", "version"], batch)
    return {r["chunk_id"]: (r["document_id"], int(r["version"])) for r in rows}
