"""``ragstream bench e2e``: pipeline throughput against a plain in-process loop.

Both sides process the same corpus with the same stage functions (normalize_file,
partition_file, chunk_elements, embed_text_for, the configured embedder, Milvus
upsert), on the same machine, in the same run:

- pipeline: files are ingested through the CLI path (S3 upload, upload events) into
  the running stack with one all-stages worker; the clock runs from the first
  upload to the last terminal status.
- direct: one Python loop calls the stage functions file by file in this process.

Pages: a PDF's page count, else the highest element page number (sheets, slides),
and at least 1 — the ``pages`` of the processed output, computed the same way on
both sides.
Each side is warmed up first with one small document (process-pool start, model
load), so the figures are steady-state throughput.  The embedding cache is emptied
before the pipeline run, so it embeds every distinct chunk text like the direct loop;
``embedded=N cached=M`` says how many chunks it embedded and how many it reused.  The
pipeline run's per-stage profile (work per stage, partition by strategy, waiting in
topics: bench/profile.py) is printed after the table.  The last line printed is
``e2e_vs_direct=<pipeline pages/s ÷ direct pages/s>``.
"""
from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table


@dataclass
class Run:
    """One measured side: documents, pages, chunks, failures and seconds."""

    name: str
    documents: int = 0
    pages: int = 0
    chunks: int = 0
    failed: int = 0
    seconds: float = 0.0
    embedded: int = 0  # pipeline: rows the embedding cache gained (distinct texts embedded)
    project: str = ""
    empty: int = 0
    # pipeline: ``{file path: (chunks, pages)}``, (0, 0) for a file that did not complete
    per_file: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds else 0.0


def corpus_files(corpus: Path) -> list[Path]:
    """The corpus's documents (sorted; CSV ground truth and dotfiles left out)."""
    return sorted(p for p in corpus.rglob("*")
                  if p.is_file() and p.suffix.lower() != ".csv" and not p.name.startswith("."))


def page_total(page_count: int | None, elements: list[dict]) -> int:
    """Pages of a document: its page count, or the highest element page number (≥ 1)."""
    return max([1, page_count or 0] + [e.get("metadata", {}).get("page_number") or 1 for e in elements])


async def direct_one(path: Path, project: str, embedder, vectors, run: Run) -> None:
    """Process one file through the stage functions in this process."""
    from schemas import chunk_id
    from stages.chunk import chunk_elements
    from stages.enhance import embed_text_for
    from stages.errors import DocumentError
    from stages.normalize import normalize_file
    from stages.partition import partition_file
    from stages.profiles import get_profile

    profile = get_profile("default")
    doc = "bench-" + uuid.uuid4().hex[:12]
    run.documents += 1
    try:
        with tempfile.TemporaryDirectory() as tmp:
            norm = normalize_file(path, Path(tmp), profile)
            elements = partition_file(norm.path, norm.filetype, profile, None, path.name)
        chunks = chunk_elements(elements)
    except DocumentError:
        run.failed += 1
        return
    texts = [embed_text_for(c["text"], c["element_types"], c["table_html"]) for c in chunks]
    vecs = await embedder.embed(texts)
    rows = [{"chunk_id": chunk_id(doc, 1, i), "vector": v.tolist(), "document_id": doc,
             "version": 1, "chunk_index": i, "page_number": c["page_number"],
             "element_types": ",".join(c["element_types"]), "filename": path.name,
             "project": project, "category": "default", "text": c["text"]}
            for i, (c, v) in enumerate(zip(chunks, vecs))]
    if rows:
        await vectors.upsert(project, rows)
    run.pages += page_total(norm.page_count, elements)
    run.chunks += len(chunks)


async def run_direct(files: list[Path], warmup: Path, settings) -> Run:
    """The plain loop over ``files`` (after one warm-up document)."""
    from adapters.embedder import create_embedder
    from adapters.vector_store import VectorStore

    project = "benchdirect" + uuid.uuid4().hex[:6]
    embedder = create_embedder(settings)
    vectors = VectorStore(settings.milvus_uri)
    try:
        await direct_one(warmup, project, embedder, vectors, Run("warmup"))
        run = Run("direct loop")
        t0 = time.perf_counter()
        for f in files:
            await direct_one(f, project, embedder, vectors, run)
        run.seconds = time.perf_counter() - t0
        return run
    finally:
        await embedder.close()
        vectors.close()


async def _pipeline_pages(done, project: str, settings) -> dict[str, int]:
    """``{document_id: pages}`` of completed documents (at least 1 each), from their
    processed output in object storage."""
    import orjson

    from adapters.object_keys import processed_key
    from adapters.object_store import ObjectStore

    pages: dict[str, int] = {}
    async with ObjectStore(settings) as store:
        for ev in done:
            body = orjson.loads(await store.get_bytes(processed_key(project, ev.document_id, ev.version)))
            pages[ev.document_id] = max(1, body.get("pages") or 0)
    return pages


async def embed_cache_rows(settings, clear: bool = False) -> int:
    """Rows of the embedding cache (emptied first with ``clear``; the schema is
    brought to head first, for a stack no worker has touched yet)."""
    from adapters.embedding_cache import EmbeddingCache
    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head

    await upgrade_head(settings.pg_dsn)
    async with Metadata(settings.pg_dsn) as md:
        if clear:
            await EmbeddingCache(md.pool).clear()
        return await EmbeddingCache(md.pool).count()


def run_pipeline(files: list[Path], warmup: Path, settings, console: Console,
                 on_start: Callable[[], None] | None = None, category: str = "default") -> Run:
    """Ingest ``files`` through the running pipeline (after one warm-up document),
    uploaded with ``category`` (its profile: stages/profiles.py); ``on_start`` is
    called after the warm-up, just before the clock starts."""
    from cli.progress import ingest_and_follow

    quiet = Console(quiet=True)
    project = "benchpipe" + uuid.uuid4().hex[:6]
    asyncio.run(ingest_and_follow([warmup], project=project + "w", category=category,
                                  timeout_s=600, console=quiet))
    asyncio.run(embed_cache_rows(settings, clear=True))
    if on_start:
        on_start()
    t0 = time.perf_counter()
    outcome = asyncio.run(ingest_and_follow(files, project=project, category=category,
                                            timeout_s=3600, console=quiet))
    run = Run("pipeline (Kafka + Faust)", seconds=time.perf_counter() - t0,
              documents=len(outcome.results), project=project)
    done = [e for e in outcome.last.values() if e.status == "COMPLETED"]
    run.failed = outcome.count("FAILED") + (len(outcome.results) - len(outcome.last))
    run.chunks = sum(e.chunks_total for e in done)
    run.empty = sum(1 for e in done if not e.chunks_total)
    pages = asyncio.run(_pipeline_pages(done, project, settings))
    run.pages = sum(pages.values())
    chunks = {e.document_id: e.chunks_total for e in done}
    run.per_file = {str(r.path): (chunks.get(r.document_id, 0), pages.get(r.document_id, 0))
                    for r in outcome.results}
    run.embedded = asyncio.run(embed_cache_rows(settings))
    return run


def bench_e2e(corpus: Path | None, console: Console, keep_running: bool = False) -> float:
    """Run both sides and print the comparison; returns pipeline ÷ direct (pages/s)."""
    from bench.profile import StageProbe, print_profile
    from stages.samples import generate_samples
    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    settings = get_settings()
    work = Path(tempfile.mkdtemp(prefix="ragstream-bench-"))
    samples = generate_samples(work / "samples")
    files = corpus_files(corpus) if corpus else samples
    warmup = samples[2]  # the HTML sample: small, exercises every stage
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    probe = StageProbe()
    worker = start_worker(settings.data_dir / "logs" / "bench-worker.log", env=probe.env)
    probe.watch(worker.pid, settings.data_dir)
    try:
        console.print(f"corpus: {corpus or 'generated samples'} ({len(files)} files)")
        pipe = run_pipeline(files, warmup, settings, console, on_start=probe.mark)
        profile = probe.profile(settings, pipe.project, pipe.seconds)
    finally:
        stop_worker(worker)
    direct = asyncio.run(run_direct(files, warmup, settings))
    if not keep_running:
        devstack.down(settings)
    table = Table("run", "docs", "failed", "pages", "chunks", "seconds", "pages/s", "chunks/s")
    for r in (pipe, direct):
        table.add_row(r.name, str(r.documents), str(r.failed), str(r.pages), str(r.chunks),
                      f"{r.seconds:.1f}", f"{r.pages_per_s:.2f}", f"{r.chunks_per_s:.2f}")
    console.print(table)
    print(f"embedded={pipe.embedded} cached={max(pipe.chunks - pipe.embedded, 0)}")
    ratio = pipe.pages_per_s / direct.pages_per_s if direct.pages_per_s else 0.0
    print_profile(profile, console)
    console.print(f"chunks/s ratio {pipe.chunks_per_s / max(direct.chunks_per_s, 1e-9):.3f}")
    print(f"e2e_vs_direct={ratio:.3f}")
    return ratio
