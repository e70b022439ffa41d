"""``ragstream reindex`` on the real test stack: replay the embeddings topic into
``chunks_P__v{n+1}`` while searches run, swap the alias, roll back, and the test
alias (streams/reindex.py, adapters/collection_aliases.py)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import ingest, run

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[1]

DOCS = {
    "pumps.md": "# Pumps\n\nThe north pump station runs three duty pumps and one standby pump.\n\n"
                "## Energy\n\nPump station energy use fell by a tenth after the new drives.\n",
    "valves.md": "# Valves\n\nGate valves on the trunk main are exercised every spring.\n",
    "reservoir.md": "# Reservoir\n\nThe upland reservoir held 82 percent of its storage in March.\n",
    "billing.md": "# Billing\n\nCustomer billing moved to monthly statements for metered homes.\n",
}


def test_wanted_follows_the_index_stage_rules():
    from adapters.version_ledger import Outcome, VersionState
    from streams.replay import wanted

    def state(version, latest, deleted=0, outcome=None, current=0):
        out = None if outcome is None else Outcome("d", version, "p", outcome, 1, None, True)
        return VersionState("d", version, latest, deleted, out, current)

    assert wanted(state(1, 1, outcome="COMPLETED", current=1))          # the current version
    assert wanted(state(2, 2, current=1))                               # newer, in flight
    assert not wanted(state(1, 2, outcome="COMPLETED", current=2))      # superseded by a completed one
    assert not wanted(state(1, 2, current=0))                           # superseded, never completed
    assert not wanted(state(2, 2, outcome="FAILED", current=1))         # failed
    assert not wanted(state(1, 1, deleted=1, outcome="COMPLETED"))      # deleted


def test_milvus_lite_alter_alias_moves_reads_to_the_new_collection(stack, project):
    """The swap primitive: Milvus Lite supports alter_alias; reads through the alias
    see the new collection at once, and pointing back restores the old."""
    from adapters import collection_aliases as ca
    from adapters.vector_store import DIM, VectorStore, alias_name

    store = VectorStore(stack.milvus_uri)
    try:
        rows = lambda v: [{"chunk_id": f"d:{v}:0", "vector": [1.0] + [0.0] * (DIM - 1), "document_id": "d",  # noqa: E731
                           "version": v, "chunk_index": 0, "page_number": 1, "element_types": "Title",
                           "filename": "d.md", "project": project, "category": "default", "text": f"v{v}"}]
        v1, v2 = (ca.create_version(store, project, v) for v in (1, 2))
        for v, name in ((1, v1), (2, v2)):
            ca.upsert_rows(store, name, rows(v))
        alias = alias_name(project)
        assert ca.point_alias(store, alias, v1) is None  # created
        assert ca.physical_versions(store, project) == {1: v1, 2: v2}

        def read() -> set:
            return set(ca.chunk_versions(store, project, alias))
        assert read() == {"d:1:0"}
        assert ca.point_alias(store, alias, v2) == v1 and ca.alias_target(store, alias) == v2
        assert read() == {"d:2:0"}
        assert ca.point_alias(store, alias, v1) == v2 and read() == {"d:1:0"}
    finally:
        store.close()


class SearchLoop(threading.Thread):
    """Searches ``project`` (prod alias) back to back with long-lived clients, as the
    API does, until stopped; counts searches, failures and empty answers."""

    def __init__(self, settings, project: str, query: str):
        super().__init__(daemon=True)
        self.settings, self.project, self.query = settings, project, query
        self.stop = threading.Event()
        self.searches = self.failures = self.empty = 0
        self.errors: list[str] = []

    def run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        from adapters.metadata import Metadata
        from adapters.vector_store import VectorStore
        from search.query import SearchClients, search

        store = VectorStore(self.settings.milvus_uri)
        try:
            async with Metadata(self.settings.pg_dsn) as md:
                clients = SearchClients(md, store)
                while not self.stop.is_set():
                    try:
                        result = await search(self.query, project=self.project, k=3, settings=self.settings,
                                              rerank_results=False, clients=clients)
                        self.empty += not result.hits
                    except Exception as exc:  # noqa: BLE001 — counted: the test wants none
                        self.failures += 1
                        self.errors.append(repr(exc)[:300])
                    self.searches += 1
        finally:
            store.close()


def _cli(*args: str) -> dict:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ragstream"), *args, "--json"], env=dict(os.environ),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


async def _catch_up(settings, project: str, group: str, collection: str) -> tuple[int, int]:
    """Resume ``group`` (a finished reindex's) from its committed offsets to the end,
    into ``collection``: the catch-up pass alone.  Returns (records read, written)."""
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from streams.replay import Replay
    from topics import EMBEDDINGS

    store = VectorStore(settings.milvus_uri)
    try:
        async with Metadata(settings.pg_dsn) as md, Replay(settings.kafka_bootstrap, EMBEDDINGS, group, project,
                                                            md.ledger, store, collection) as replay:
            read = await replay.run_to(await replay.end_offsets())
            return read, replay.written
    finally:
        store.close()


@pytest.mark.slow  # ~40 s on a warm worker (ingests), minutes when the worker starts cold
def test_reindex_swaps_under_search_and_rolls_back(stack, worker, tmp_path, project, output_dir):
    from adapters import collection_aliases as ca
    from adapters.vector_store import VectorStore, alias_for
    from search.query import search
    from streams.alias_moves import aliases
    from streams.reindex import reindex

    for name, text in DOCS.items():
        (tmp_path / name).write_text(text)
    first = ingest(sorted(tmp_path.iterdir()), project)
    assert {e.status for e in first.last.values()} == {"COMPLETED"}, first.last
    # a second version of one document: its v1 records stay in the topic, replay skips them
    (tmp_path / "valves.md").write_text("# Valves\n\nGate and butterfly valves are exercised each spring.\n")
    second = ingest([tmp_path / "valves.md"], project)
    assert second.results[0].version == 2 and second.last[second.results[0].document_id].status == "COMPLETED"

    store = VectorStore(stack.milvus_uri)
    v1 = ca.physical_name(project, 1)
    before = ca.chunk_versions(store, project, v1)
    assert before and all(v == 2 for d, v in before.values() if d == second.results[0].document_id)

    loop = SearchLoop(stack, project, "pump station energy use")
    loop.start()
    try:
        while loop.searches < 3:  # the loop is serving the old collection before the reindex starts
            assert loop.is_alive()
            time.sleep(0.05)
        report = run(reindex(project, settings=stack))
        searched_during = loop.searches
    finally:
        loop.stop.set()
        loop.join(timeout=60)
    v2 = ca.physical_name(project, 2)
    (output_dir / "reindex.json").write_text(json.dumps({**report.as_dict(), "searches": loop.searches,
                                                         "failed_searches": loop.failures,
                                                         "empty_searches": loop.empty}, indent=1))
    print(f"reindex {report.seconds:.2f} s, {report.records_replayed} records, {report.chunks_written} "
          f"written; searches {loop.searches}, failed {loop.failures}, empty {loop.empty}")
    assert loop.failures == 0, loop.errors[:3]
    assert loop.empty == 0 and searched_during > 3
    assert (report.collection, report.previous) == (v2, v1)
    assert report.documents == len(DOCS)
    assert ca.alias_target(store, alias_for(project)) == v2
    assert ca.chunk_versions(store, project, v2) == before  # the same chunk ids, of the current versions only
    assert report.records_replayed > report.chunks_written >= len(before)  # v1 of valves.md and others skipped

    # rollback (CLI): prod back to v1; search still answers
    assert _cli("reindex", "-p", project, "--rollback") == {"project": project, "alias": "prod",
                                                              "from": v2, "to": v1}
    assert ca.alias_target(store, alias_for(project)) == v1
    assert _cli("reindex", "-p", project, "--show") == {"prod": v1, "test": None, "versions": [1, 2],
                                                          "rollback": {"prod": None, "test": None}}

    # the test alias: a new v3 behind chunks_P__test, prod left on v1; search --alias test reads it
    test_report = run(reindex(project, settings=stack, alias="test"))
    v3 = ca.physical_name(project, 3)
    assert (test_report.collection, test_report.previous) == (v3, None)
    assert aliases(project, settings=stack) == {"prod": v1, "test": v3, "versions": [1, 2, 3],
                                                "rollback": {"prod": None, "test": v2}}
    hits = run(search("reservoir storage", project=project, k=3, settings=stack, rerank_results=False,
                      alias="test")).hits
    assert hits and "reservoir" in hits[0]["text"].lower()

    # catch-up: a document indexed (through prod, into v1) after v3's replay ended is
    # read from v3's group offsets and written to v3, and nothing else is
    (tmp_path / "pipes.md").write_text("# Pipes\n\nPipe renewal replaced nine kilometres of cast iron mains.\n")
    late = ingest([tmp_path / "pipes.md"], project)
    late_id = late.results[0].document_id
    assert late.last[late_id].status == "COMPLETED"
    assert late_id not in {d for d, _ in ca.chunk_versions(store, project, v3).values()}
    read, written = run(_catch_up(stack, project, test_report.group, v3))
    assert read >= written == late.last[late_id].chunks_total
    assert {d for d, _ in ca.chunk_versions(store, project, v3).values()} == {d for d, _ in ca.chunk_versions(store, project, v1).values()}
    assert run(_catch_up(stack, project, test_report.group, v3))[1] == 0  # offsets committed: nothing again

    assert _cli("reindex", "-p", project, "--promote") == {"project": project, "alias": "prod",
                                                             "from": v1, "to": v3}
    assert aliases(project, settings=stack)["prod"] == v3

    # a new embedder: enhanced-chunks replayed and embedded again (in process, ONNX)
    onnx_report = run(reindex(project, settings=stack, embedder="onnx", alias="test"))
    v4 = ca.physical_name(project, 4)
    assert (onnx_report.topic, onnx_report.collection, onnx_report.previous) == ("ragstream.enhanced-chunks", v4, v3)
    assert ca.chunk_versions(store, project, v4) == ca.chunk_versions(store, project, v3)
    assert aliases(project, settings=stack) == {"prod": v3, "test": v4, "versions": [1, 2, 3, 4],
                                                "rollback": {"prod": v1, "test": v3}}

    # --rollback undoes the alias's last move, not "one version lower": prod goes back
    # to v1, which the promote replaced (v2 is the next-lower version), and the test
    # alias to v3; a second rollback in a row falls back to the next-lower version
    assert _cli("reindex", "-p", project, "--rollback") == {"project": project, "alias": "prod",
                                                              "from": v3, "to": v1}
    assert _cli("reindex", "-p", project, "--rollback", "--alias", "test") == {
        "project": project, "alias": "test", "from": v4, "to": v3}
    assert aliases(project, settings=stack) == {"prod": v1, "test": v3, "versions": [1, 2, 3, 4],
                                                "rollback": {"prod": None, "test": v2}}
    assert _cli("reindex", "-p", project, "--rollback", "--alias", "test")["to"] == v2
    store.close()


class _SlowEmbedder:
    """The in-process embedder, each call held back ``delay_s`` (a re-embedding pass
    on a busy CPU, in small measure)."""

    def __init__(self, delay_s: float):
        from adapters.embedder import OnnxEmbedder

        self.inner, self.delay_s, self.calls = OnnxEmbedder(), delay_s, 0

    async def embed(self, texts):
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return await self.inner.embed(texts)


def test_a_pass_longer_than_the_silence_limit_completes(stack, worker, tmp_path, project):
    """A re-embedding replay (``ragstream reindex --embedder onnx``) failed on a 33-document
    project: run_to's 120 s counted the whole pass.  Now it counts silence: here each
    fetch of 2 records waits 0.6 s to embed, the pass takes several seconds, the limit
    is 1 s, and every current chunk is written."""
    from adapters import collection_aliases as ca
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from streams.replay import Replay, current_chunk_counts
    from topics import ENHANCED

    (tmp_path / "pumps.md").write_text("\n\n".join(
        f"# Pump {i}\n\nPump {i} runs at {100 + i} litres a minute and is serviced every {i + 2} months; "
        + "its bearings and seals are checked and replaced when worn. " * 12 for i in range(6)))
    done = ingest([tmp_path / "pumps.md"], project)
    assert {e.status for e in done.last.values()} == {"COMPLETED"}, done.last
    settings = stack
    store = VectorStore(settings.milvus_uri)
    embedder = _SlowEmbedder(0.6)

    async def go():
        collection = await asyncio.to_thread(ca.create_version, store, project,
                                             max(await asyncio.to_thread(ca.physical_versions, store, project)) + 1)
        async with Metadata(settings.pg_dsn) as md, Replay(
                settings.kafka_bootstrap, ENHANCED, f"test-slow-{project}", project, md.ledger, store,
                collection, embedder=embedder) as replay:
            replay.batch = 2
            ends = await replay.end_offsets()
            for tp in replay.partitions:  # this document's chunks are the newest records: skip the rest
                replay.consumer.seek(tp, max(0, ends[tp] - 20))
            started = time.monotonic()
            await replay.run_to(ends, timeout_s=1.0)
            return replay.written, time.monotonic() - started, await current_chunk_counts(md.ledger, project)

    try:
        written, took, counts = run(go())
    finally:
        store.close()
        run(embedder.inner.close())
    [(_, chunks)] = counts.values()
    assert 3 <= chunks <= 20 and written == chunks
    assert embedder.calls >= 2 and took > 1.0  # longer than the limit, and it finished
