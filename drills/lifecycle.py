"""The ``tenants`` and ``lifecycle`` drills (issue 23): isolation, alias moves and
erasure end to end on the embedded stack.  Each fault adds to ``run.leaked``: chunks
or bytes of one project reachable from another, or of a deleted document reachable
anywhere (drills/leaks.py).  The drill's own documents are then checked like every
drill's (lost, extra, one COMPLETED and one callback per version).

tenants    A sibling project whose name differs only by ``-``/``_`` (one collection
           under the old name mapping) ingests files under the same names as the
           drill's (so the same default ids) with a marker word; then the sibling is
           reindexed (before: that repointed the shared alias).  Leaks: the marker
           found by the drill project's search, the drill's text found by the
           sibling's, or anything of the sibling in the drill's collection (extra).
           The sibling is deleted at the end (``project delete``); its marker must
           then be nowhere.
lifecycle  After the corpus completes: two documents carrying a marker are ingested;
           the project is reindexed (prod → v2); two more documents arrive (they
           are indexed into v2 only); ``--rollback`` (prod → v1) must bring them along
           (lost otherwise); the two marker documents are deleted and must leave no
           copy in any topic, collection, table or object.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from drills.leaks import leak_count, leak_report

TERMINAL = {"COMPLETED", "FAILED", "DELETED"}


async def _ingest(settings: Any, project: str, paths: list[Path], callback: str | None = None) -> list[Any]:
    """Upload files to ``project`` as ``ragstream ingest`` does; the IngestResults."""
    from adapters.metadata import Metadata
    from adapters.object_store import ObjectStore
    from streams.ingest import ingest_file
    from streams.kafka_io import producer

    async with ObjectStore(settings) as store, Metadata(settings.pg_dsn) as md, \
            producer(settings.kafka_bootstrap) as prod:
        await store.ensure_bucket()
        return [await ingest_file(p, project=project, category="default", store=store, metadata=md,
                                  producer=prod, callback_url=callback) for p in paths]


async def _wait_status(settings: Any, documents: list[str], wanted: set[str], timeout_s: float = 300.0) -> dict:
    """Poll the projection until every document's status is in ``wanted``; returns
    ``{document: status}``.  Raises TimeoutError naming the laggards."""
    from adapters.metadata import Metadata

    deadline = time.monotonic() + timeout_s
    async with Metadata(settings.pg_dsn) as md:
        while True:
            rows = {d: (await md.get_document(d) or {}).get("status") for d in documents}
            if all(s in wanted for s in rows.values()):
                return rows
            if time.monotonic() > deadline:
                raise TimeoutError(f"not {sorted(wanted)} after {timeout_s:g} s: "
                                   f"{ {d: s for d, s in rows.items() if s not in wanted} }")
            await asyncio.sleep(0.5)


async def _delete(settings: Any, project: str, document_id: str) -> None:
    """A document's DELETE, as the API sends it."""
    from adapters.metadata import Metadata
    from streams.ingest import queue_delete
    from streams.kafka_io import producer

    async with Metadata(settings.pg_dsn) as md, producer(settings.kafka_bootstrap) as prod:
        row = await md.latest_version(document_id)
        await queue_delete(document_id=document_id, version=row["version"], project=project,
                           category=row["category"], filename=row["filename"], bucket=settings.bucket,
                           key=row["raw_key"], sha256=row["sha256"], size=row["size"], producer=prod,
                           metadata=md)


def _marked_files(directory: Path, marker: str, names: list[str]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i, name in enumerate(names):
        p = directory / name
        p.write_text(f"Confidential note {i}: the {marker} ledger holds account {marker}-{i}.\n" * 3)
        out.append(p)
    return out


async def _foreign_hits(settings: Any, project: str, query: str, must_not: str) -> int:
    """Hits of ``project``'s search for ``query`` that are not its own or hold
    ``must_not``."""
    from search.query import search

    hits = (await search(query, project=project, k=20, settings=settings, rerank_results=False)).hits
    return sum(1 for h in hits if h.get("project") != project
               or not str(h.get("document_id", "")).startswith(f"{project}.") or must_not in h.get("text", ""))


async def fault_tenants(stack: Any, run: Any) -> None:
    """The ``tenants`` drill's fault (module docstring)."""
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from streams.project_erasure import delete_project
    from streams.kafka_io import producer
    from streams.reindex import reindex

    settings = stack.settings
    sibling = run.project.replace("-", "_")
    marker = f"quokka{uuid.uuid4().hex[:10]}"
    names = [p.name for p in run.paths[:2]]
    await run.completed_at_least(1.0)
    files = _marked_files(run.corpus_dir / "sibling", marker, [f"{Path(n).stem}.txt" for n in names])
    results = await _ingest(settings, sibling, files)
    await _wait_status(settings, [r.document_id for r in results], {"COMPLETED"})
    await reindex(sibling, settings=settings)
    leaked = await _foreign_hits(settings, run.project, marker, marker)
    # the sibling holds two documents: its top 20 for any query would show the drill's chunks
    leaked += await _foreign_hits(settings, sibling, "confidential ledger account", "\0never")
    run.notes.append(f"sibling {sibling}: {len(results)} docs, reindexed, {leaked} cross-project hits")
    store = VectorStore(settings.milvus_uri)
    try:
        async with Metadata(settings.pg_dsn) as md, producer(settings.kafka_bootstrap) as prod:
            await delete_project(sibling, metadata=md, producer=prod, store=store, bucket=settings.bucket)
    finally:
        store.close()
    await _wait_status(settings, [r.document_id for r in results], {"DELETED"})
    report = await leak_report(settings, sibling, marker)
    found = leak_count(report)
    if found:
        run.notes.append(f"deleted sibling's marker still in {report}")
    run.leaked += leaked + found


async def fault_lifecycle(stack: Any, run: Any) -> None:
    """The ``lifecycle`` drill's fault (module docstring)."""
    from streams.alias_moves import rollback
    from streams.reindex import reindex

    settings = stack.settings
    marker = f"wombat{uuid.uuid4().hex[:10]}"
    await run.completed_at_least(1.0)
    secret = await _ingest(settings, run.project,
                           _marked_files(run.corpus_dir / "secret", marker, [f"{marker}-a.txt", f"{marker}-b.txt"]),
                           run.receiver.url(run.project))
    await _wait_status(settings, [r.document_id for r in secret], {"COMPLETED"})
    report = await reindex(run.project, settings=settings)
    late_dir = run.corpus_dir / "late"
    late_dir.mkdir(parents=True, exist_ok=True)
    late = []
    for i in range(2):
        p = late_dir / f"late-{i}.md"
        p.write_text(f"# Late arrival {i}\n\nIndexed after the swap to {report.collection}.\n")
        late.append(p)
    await run.ingest(late)
    await run.completed_at_least(1.0)
    moved = await rollback(run.project, settings=settings)
    run.notes.append(f"reindexed to {report.collection}, 2 docs after, rolled back {moved[0]} → {moved[1]}")
    for r in secret:
        await _delete(settings, run.project, r.document_id)
    await _wait_status(settings, [r.document_id for r in secret], {"DELETED"})
    found = await leak_report(settings, run.project, marker)
    run.leaked += leak_count(found)
    if leak_count(found):
        run.notes.append(f"deleted documents' marker still in {found}")
