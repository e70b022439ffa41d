"""Per-project collections are not loaded for ever (issue 27, finding 9), on the test
stack's Milvus Lite:

- a collection a process has not used for ``RAGSTREAM_MILVUS_RELEASE_IDLE_S`` is
  released (adapters/idle_collections.py), and the next search loads it again — from
  the process that released it and from another one that still thought it loaded;
- a collection no alias searches any more (after a reindex swap only ``__previous``
  remembers it) is released, and a document's rows can still be deleted from it
  (erasure reaches every collection of a project) without loading it for good.

Lite frees no memory on release (README, "Milvus at scale"); these tests show the load
state and that nothing breaks, which holds on any Milvus.
"""
from __future__ import annotations

import time

import pytest

from adapters import collection_aliases as ca
from adapters.idle_collections import release_idle, sweep_interval
from adapters.vector_store import VectorStore, alias_name
from tests.test_milvus_index_type import _rows, _unit

pytestmark = pytest.mark.integration


def _loaded(store: VectorStore, name: str) -> bool:
    return store.run_sync("get_load_state", lambda c: ca.is_loaded(c, name))


def _count(store: VectorStore, name: str) -> int:
    return store.run_sync("count", lambda c: c.query(name, filter="", output_fields=["count(*)"],
                                                     consistency_level="Strong")[0]["count(*)"])


def test_sweeps_come_at_a_quarter_of_the_idle_time_within_bounds():
    assert sweep_interval(3600) == 300 and sweep_interval(400) == 100 and sweep_interval(2) == 1


def test_an_idle_collection_is_released_and_the_next_search_loads_it(stack, project):
    api, index = VectorStore(stack.milvus_uri), VectorStore(stack.milvus_uri)  # two processes' stores
    try:
        index.upsert_sync(project, _rows(project, 5))
        index.flush_sync(project)
        assert len(api.search_sync(project, _unit(2), k=3)) == 3
        alias = alias_name(project)
        assert release_idle(api, idle_s=60) == []  # just used
        assert release_idle(api, idle_s=60, now=time.monotonic() + 61) == [alias]
        assert not _loaded(api, alias) and alias not in api.loaded_here()
        # the other store still believes it loaded: its search meets "not loaded" and loads it
        assert index.search_sync(project, _unit(2), k=1)[0]["chunk_id"] == f"{project}.d:1:2"
        assert _loaded(api, alias)
        assert release_idle(index, idle_s=60, now=time.monotonic() + 61) == [alias]
        assert api.search_sync(project, _unit(3), k=1)[0]["chunk_id"] == f"{project}.d:1:3"
        assert _loaded(api, alias) and alias in api.loaded_here()
    finally:
        api.close()
        index.close()


def test_a_collection_no_alias_searches_is_released_and_still_erasable(stack, project):
    store = VectorStore(stack.milvus_uri)
    try:
        old = ca.create_version(store, project, 1)
        ca.upsert_rows(store, old, _rows(project, 4))
        store.run_gated("flush", lambda c: c.flush(old))
        ca.point_alias(store, alias_name(project), old)
        assert not ca.release_if_unsearched(store, old)  # prod searches it
        new = ca.create_version(store, project, 2)
        ca.point_alias(store, alias_name(project), new)
        ca.point_alias(store, ca.previous_alias(alias_name(project)), old)
        assert ca.release_if_unsearched(store, old)  # only __previous remembers it
        assert not _loaded(store, old) and _loaded(store, new)
        ca.delete_where(store, project, old, f'chunk_index < 2')
        assert not _loaded(store, old)  # loaded for the delete only
        ca.load(store, old)
        assert _count(store, old) == 2
    finally:
        store.close()
