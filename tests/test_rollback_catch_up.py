"""Issue 23, failure 3: an alias move never drops a document the ledger says is
COMPLETED, nor brings back one that was deleted (streams/alias_moves.py,
streams/replay.py ``catch_up_and_move``).

Before: ingest A, reindex (prod → v2), ingest B (COMPLETED, written into v2), then
``--rollback`` (prod → v1): B was no longer found while its status said COMPLETED.
"""
from __future__ import annotations

import pytest

from conftest import ingest, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _documents(store, project: str, collection: str) -> set[str]:
    from adapters import collection_aliases as ca

    return {d for d, _ in ca.chunk_versions(store, project, collection).values()}


def test_rollback_and_promote_bring_the_target_up_to_the_ledger(stack, worker, tmp_path, project):
    from adapters import collection_aliases as ca
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore, alias_for
    from search.query import search
    from streams.alias_moves import promote, rollback
    from streams.ingest import queue_delete
    from streams.kafka_io import producer
    from streams.reindex import reindex

    def doc(name: str, text: str):
        (tmp_path / name).write_text(text)
        out = ingest([tmp_path / name], project)
        res = out.results[0]
        assert out.last[res.document_id].status == "COMPLETED", out.last
        return res

    a = doc("heron.md", "# Herons\n\nThe grey heron colony nested in the alder carr this spring.\n")
    gone = doc("otter.md", "# Otters\n\nOtter spraints were found under the mill bridge.\n")
    run(reindex(project, settings=stack))  # prod → v2
    store = VectorStore(stack.milvus_uri)
    v1, v2 = ca.physical_name(project, 1), ca.physical_name(project, 2)
    try:
        b = doc("kingfisher.md", "# Kingfishers\n\nA kingfisher pair fished the weir pool daily.\n")
        assert b.document_id not in _documents(store, project, v1)  # written into v2 only

        async def delete(res) -> None:
            async with Metadata(stack.pg_dsn) as md, producer(stack.kafka_bootstrap) as prod:
                row = await md.latest_version(res.document_id)
                await queue_delete(document_id=res.document_id, version=row["version"], project=project,
                                   category=row["category"], filename=row["filename"], bucket=stack.bucket,
                                   key=row["raw_key"], sha256=row["sha256"], size=row["size"],
                                   producer=prod, metadata=md)
        run(delete(gone))  # deleted after v1 was left: a rollback must not bring it back
        assert gone.document_id in _documents(store, project, v1)

        assert run(rollback(project, settings=stack)) == (v2, v1)
        assert ca.alias_target(store, alias_for(project)) == v1
        docs = _documents(store, project, v1)
        assert {a.document_id, b.document_id} <= docs and gone.document_id not in docs
        hits = run(search("kingfisher weir pool", project=project, k=3, settings=stack,
                          rerank_results=False)).hits
        assert hits and hits[0]["document_id"] == b.document_id

        # promote: the test alias's collection is caught up with what prod got meanwhile
        run(reindex(project, settings=stack, alias="test"))  # test → v3
        v3 = ca.physical_name(project, 3)
        c = doc("dipper.md", "# Dippers\n\nDippers walked under water at the riffle below the ford.\n")
        assert c.document_id not in _documents(store, project, v3)
        assert run(promote(project, settings=stack)) == (v1, v3)
        assert c.document_id in _documents(store, project, v3)
    finally:
        store.close()


def test_an_alias_move_to_a_collection_that_cannot_catch_up_is_refused(stack, worker, tmp_path, project):
    """The ledger holds a COMPLETED version whose records the topic lacks (a lost
    record): the rollback names it, raises ReindexIncomplete, and the alias stays."""
    from adapters import collection_aliases as ca
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore, alias_for
    from streams.alias_moves import rollback
    from streams.reindex import reindex
    from streams.replay import ReindexIncomplete

    (tmp_path / "wren.md").write_text("# Wrens\n\nA wren sang from the woodpile.\n")
    assert ingest([tmp_path / "wren.md"], project).results[0].version == 1
    run(reindex(project, settings=stack))  # prod → v2

    async def phantom() -> None:
        async with Metadata(stack.pg_dsn) as md:
            await md.pool.execute(
                "INSERT INTO version_outcomes (document_id, version, project, outcome, chunks)"
                " VALUES ($1, 1, $2, 'COMPLETED', 3)", f"{project}.phantom", project)
    run(phantom())
    with pytest.raises(ReindexIncomplete, match="phantom"):
        run(rollback(project, settings=stack, complete_within_s=2))
    store = VectorStore(stack.milvus_uri)
    try:
        assert ca.alias_target(store, alias_for(project)) == ca.physical_name(project, 2)
    finally:
        store.close()
