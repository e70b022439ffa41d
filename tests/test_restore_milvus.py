"""Milvus lost, the project rebuilt from the topics (README "Backups and restore"): a
project's documents are ingested, every collection and alias of the project is
dropped (what an emptied Milvus leaves it: nothing), ``ragstream reindex -p P``
replays the ``embeddings`` topic into a new collection, and then search finds every
current version again, a superseded version stays out, and a document ingested after
the restore is indexed into the rebuilt collection by the running worker."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ingest, ingest_texts, run

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[1]

DOCS = {
    "kilns.md": "# Kilns\n\nThe tunnel kiln fires roof tiles at 1,150 degrees for nineteen hours.\n",
    "glazes.md": "# Glazes\n\nA celadon glaze owes its green to a trace of iron oxide.\n",
    "clay.md": "# Clay\n\nThe quarry's red clay is aged outdoors for one winter before pressing.\n",
}


def _reindex_cli(project: str) -> dict:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ragstream"), "reindex", "-p", project, "--json"],
                         env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _top(stack, project: str, query: str) -> str:
    from search.query import search

    hits = run(search(query, project=project, k=3, settings=stack, rerank_results=False)).hits
    return hits[0]["text"].lower() if hits else ""


@pytest.mark.slow  # ~30 s on a warm worker
def test_a_project_comes_back_from_the_topics_after_milvus_is_lost(stack, worker, tmp_path, project):
    from adapters import collection_aliases as ca
    from adapters.vector_store import VectorStore, alias_for
    from streams.project_erasure import drop_project_collections

    ingest_texts(tmp_path, DOCS, project)
    (tmp_path / "clay.md").write_text("# Clay\n\nThe quarry's red clay is pressed the week it is dug.\n")
    second = ingest([tmp_path / "clay.md"], project)
    assert second.last[second.results[0].document_id].status == "COMPLETED"

    store = VectorStore(stack.milvus_uri)
    try:
        before = ca.chunk_versions(store, project, ca.alias_target(store, alias_for(project)))
        dropped = drop_project_collections(store, project)  # Milvus lost, for this project
        assert ca.physical_versions(store, project) == {} and dropped
        assert _top(stack, project, "tunnel kiln firing temperature") == ""

        report = _reindex_cli(project)
        rebuilt = ca.alias_target(store, alias_for(project))
        assert report["collection"] == rebuilt and report["documents"] == len(DOCS), report
        assert ca.chunk_versions(store, project, rebuilt) == before  # current versions only
        assert "1,150 degrees" in _top(stack, project, "tunnel kiln firing temperature")
        assert "week it is dug" in _top(stack, project, "how long is the red clay aged")

        # the running worker indexes new work into the rebuilt collection
        (tmp_path / "moulds.md").write_text("# Moulds\n\nPlaster moulds are dried for two days in the loft.\n")
        later = ingest([tmp_path / "moulds.md"], project)
        assert later.last[later.results[0].document_id].status == "COMPLETED"
        assert "plaster moulds" in _top(stack, project, "how are plaster moulds dried")
        assert later.results[0].document_id in {d for d, _ in ca.chunk_versions(store, project, rebuilt).values()}
    finally:
        store.close()
