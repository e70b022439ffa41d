"""``ragstream reprocess`` on the test stack (streams/reprocess.py): every live
document of a project runs again from its original as a new version; the new
versions' chunks replace the old ones, a deleted document stays deleted, and an
unknown id sends nothing."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ingest_texts, run

ROOT = Path(__file__).resolve().parents[1]
CLI = str(ROOT / ".venv" / "bin" / "ragstream")

DOCS = {
    "looms.md": "# Looms\n\nThe jacquard loom reads its pattern from a chain of punched cards.\n",
    "dyes.md": "# Dyes\n\nMadder root gives the mill's red; weld gives its yellow.\n",
    "wool.md": "# Wool\n\nFleeces are scoured twice before carding.\n",
}


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([CLI, *args], env=dict(os.environ), capture_output=True, text=True, timeout=600)
    if check:
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out


@pytest.mark.integration
@pytest.mark.slow  # ~40 s on a warm worker
def test_reprocess_sends_live_documents_again_as_new_versions(stack, worker, tmp_path, project):
    from adapters import collection_aliases as ca
    from adapters.object_store import ObjectStore
    from adapters.vector_store import VectorStore, alias_for

    first = ingest_texts(tmp_path, DOCS, project)
    ids = {r.path.name: r.document_id.split(".", 1)[1] for r in first.results}
    _cli("delete", ids["wool.md"], "-p", project, "--wait")
    assert _reprocess_listed_before_the_delete(stack, project, ids["wool.md"]) == []

    # an unknown id: exit 2, nothing sent
    bad = _cli("reprocess", "-p", project, "--document-id", "no-such-doc", "--json", check=False)
    assert bad.returncode == 2 and "no-such-doc" in bad.stderr

    report = json.loads(_cli("reprocess", "-p", project, "--json").stdout.strip().splitlines()[-1])
    got = {r["document_id"]: (r["previous"], r["version"], r["status"]) for r in report["reprocessed"]}
    assert got == {ids["looms.md"]: (1, 2, "COMPLETED"), ids["dyes.md"]: (1, 2, "COMPLETED")}, report

    store = VectorStore(stack.milvus_uri)
    try:
        versions = ca.chunk_versions(store, project, ca.alias_target(store, alias_for(project)))
    finally:
        store.close()
    by_doc = {(d.split(".", 1)[1], v) for d, v in versions.values()}
    assert by_doc == {(ids["looms.md"], 2), (ids["dyes.md"], 2)}, by_doc  # v1 replaced, wool stays gone

    async def raw_pair() -> tuple[bytes, bytes]:
        from adapters.metadata import Metadata

        async with Metadata(stack.pg_dsn) as md, ObjectStore(stack) as objects:
            keys = {r["version"]: r["raw_key"] for r in await md.pool.fetch(
                "SELECT version, raw_key FROM document_versions WHERE document_id = $1",
                f"{project}.{ids['looms.md']}")}
            return await objects.get_bytes(keys[1]), await objects.get_bytes(keys[2])

    v1, v2 = run(raw_pair())
    assert v1 == v2 == DOCS["looms.md"].encode()  # the original, copied to the new version's key

    from search.query import search

    hits = run(search("punched cards pattern", project=project, k=1, settings=stack, rerank_results=False)).hits
    assert hits and hits[0]["filename"] == "looms.md" and hits[0]["version"] == 2, hits


def test_malformed_ids_are_refused_before_any_service_is_asked():
    """Exit 2 naming the rule, at once (no broker wait): the id is hostile input."""
    out = _cli("reprocess", "-p", "someproject", "--document-id", "../etc/passwd", "--no-wait", check=False)
    assert out.returncode == 2 and "must match" in out.stderr, (out.returncode, out.stderr[-500:])


def _reprocess_listed_before_the_delete(stack, project: str, deleted: str) -> list:
    """The race: a document listed live, deleted before its turn.  ``reprocess`` with a
    listing taken as if before the delete must send nothing for it (the ledger refuses
    a version of a deleted document under its lock) and register no version."""
    from unittest import mock

    from adapters.metadata import Metadata
    from adapters.object_store import ObjectStore
    from streams import reprocess as rp
    from streams.kafka_io import producer

    async def go() -> list:
        async with Metadata(stack.pg_dsn) as md, ObjectStore(stack) as objects, \
                producer(stack.kafka_bootstrap) as prod:
            row = await md.latest_version(f"{project}.{deleted}")

            async def stale(*_a, **_k):
                return [row]

            with mock.patch.object(rp, "live_versions", stale):
                sent = await rp.reprocess(project, store=objects, metadata=md, producer=prod)
            versions = await md.pool.fetchval(
                "SELECT count(*) FROM document_versions WHERE document_id = $1", f"{project}.{deleted}")
            assert versions == 1
            return sent

    return run(go())
