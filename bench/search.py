"""Search latency: hybrid (dense ANN + BM25, fused by RRF in Milvus) vs dense-only,
in the same run on the same collection.

It inserts ``chunks`` synthetic chunks into a scratch project's collection (made by
the current schema, so BM25 is there), then times ``queries`` searches of each kind
through :class:`adapters.vector_store.VectorStore` (``hybrid_search_sync`` vs
``search_sync``, the same ``window`` = candidates fetched, 20 as for a k = 5
search), interleaved query by query so load on the machine hits both alike, and
prints p50/p95 in milliseconds of each and the hybrid/dense ratio.  The scratch
collection is dropped afterwards.

Synthetic on purpose: embedding 100 000 real chunks takes hours on 2 cores, so the
vectors are random and L2-normalised (384 dims, as all-MiniLM-L6-v2), which costs
the dense search the same as real ones (FLAT scans every vector).  The texts are
about ``words_per_chunk`` words drawn Zipf-like (s ≈ 1) from a vocabulary of the
embedding tokenizer's whole-word entries (about 20 000 English words), plus a
rare token (a figure like "318,285" or a code like "K7Q2") in every 50th chunk, so
BM25's posting lists have realistic lengths.  Queries are 3 words: two common-ish
words and one rare one.  Latency is the wall time of one Milvus call from this
process (gRPC round trip included), without query embedding, the ledger filter or
reranking, which are the same for both.

Milvus Lite keeps unsealed rows (up to 128 MB) in a memtable whose indexes, the
BM25 postings included, it rebuilds at every search; sealed segments keep theirs.
By default the bench flushes after inserting (the state of a large or settled
collection); ``--no-flush`` measures the memtable state (a freshly indexed small
corpus).

Milvus: the configured ``RAGSTREAM_MILVUS_URI``; when none answers there, Milvus
Lite is started for the run (``devstack``) and stopped afterwards.

Run: ``ragstream bench search --chunks 100000`` (calls :func:`bench_search`); last
line ``hybrid_p95_ms=<x> dense_p95_ms=<y> ratio=<x/y>``.
"""
from __future__ import annotations

import random
import statistics
import time
import uuid
from dataclasses import dataclass

import numpy as np
from rich.console import Console

DIM = 384
INSERT_BATCH = 1000


@dataclass
class Latencies:
    """Milliseconds of each timed search of one kind."""

    ms: list[float]

    def pct(self, q: float) -> float:
        """The ``q``-th percentile (0-100) in ms (linear interpolation)."""
        return float(np.percentile(np.array(self.ms), q))


def vocabulary() -> list[str]:
    """Whole English words (letters only, 3+ characters) of the embedding model's
    WordPiece vocabulary, in the vocabulary's order (roughly by frequency)."""
    from adapters.embedder import load_tokenizer

    vocab = load_tokenizer(pad=False).get_vocab()
    words = sorted((i, w) for w, i in vocab.items() if w.isascii() and w.isalpha() and len(w) >= 3)
    return [w for _, w in words]


def rare_token(rng: random.Random) -> str:
    """A figure ("318,285") or a code ("K7Q2") as found in tables and addresses."""
    if rng.random() < 0.5:
        return f"{rng.randint(100, 999)},{rng.randint(0, 999):03d}"
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(4))


def make_rows(project: str, start: int, n: int, words: list[str], weights: np.ndarray,
              rng: random.Random, nprng: np.random.Generator, words_per_chunk: int,
              rare: list[str]) -> list[dict]:
    """``n`` chunk rows (ids ``bench:1:{i}``) with random unit vectors and Zipf texts;
    every 50th gets a rare token, appended to ``rare``."""
    vecs = nprng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    picks = nprng.choice(len(words), size=(n, words_per_chunk), p=weights)
    rows = []
    for j in range(n):
        i = start + j
        text = " ".join(words[w] for w in picks[j])
        if i % 50 == 0:
            token = rare_token(rng)
            rare.append(token)
            text += f" {token}"
        rows.append({"chunk_id": f"bench{i // 1000}:1:{i}", "vector": vecs[j].tolist(),
                     "document_id": f"bench{i // 1000}", "version": 1, "chunk_index": i,
                     "page_number": 1 + (i % 30), "element_types": "NarrativeText",
                     "filename": f"bench{i // 1000}.txt", "project": project,
                     "category": "default", "text": text})
    return rows


def bench_search(chunks: int, console: Console, *, queries: int = 50, window: int = 20,
                 words_per_chunk: int = 150, seed: int = 0, flush: bool = True) -> tuple[Latencies, Latencies]:
    """Insert ``chunks`` synthetic chunks (then flush them into sealed segments when
    ``flush``), time ``queries`` hybrid and dense searches of ``window`` candidates
    each; prints the figures and returns (hybrid, dense)."""
    import devstack
    from adapters.vector_store import VectorStore, alias_name
    from streams.settings import get_settings

    settings = get_settings()
    started = devstack.up(settings, names=["milvus"], timeout_s=120)["milvus"].detail == "started"
    store = VectorStore(settings.milvus_uri, timeout_s=600)
    project = "bench_search_" + uuid.uuid4().hex[:8]
    rng, nprng = random.Random(seed), np.random.default_rng(seed)
    words = vocabulary()
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    rare: list[str] = []
    try:
        t0 = time.perf_counter()
        store.ensure_collection_sync(project)
        for start in range(0, chunks, INSERT_BATCH):
            n = min(INSERT_BATCH, chunks - start)
            store.upsert_sync(project, make_rows(project, start, n, words, weights, rng, nprng,
                                                 words_per_chunk, rare))
        console.print(f"inserted {chunks} synthetic chunks ({words_per_chunk} words, vocabulary "
                      f"{len(words)}) in {time.perf_counter() - t0:.1f} s into {alias_name(project)}")
        if flush:
            t0 = time.perf_counter()
            store.flush_sync(project)
            console.print(f"flushed (sealed into segments) in {time.perf_counter() - t0:.1f} s")
        qvecs = nprng.standard_normal((queries + 2, DIM)).astype(np.float32)
        qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
        texts = [f"{words[rng.randrange(50, 2000)]} {words[rng.randrange(50, 2000)]} "
                 f"{rng.choice(rare) if rare else 'none'}" for _ in range(queries + 2)]
        for i in range(2):  # warm-up (first calls load caches), not timed
            store.hybrid_search_sync(project, qvecs[i].tolist(), texts[i], window)
            store.search_sync(project, qvecs[i].tolist(), window)
        hybrid, dense = Latencies([]), Latencies([])
        for i in range(2, queries + 2):
            vec = qvecs[i].tolist()
            t = time.perf_counter()
            store.hybrid_search_sync(project, vec, texts[i], window)
            hybrid.ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            store.search_sync(project, vec, window)
            dense.ms.append((time.perf_counter() - t) * 1000)
    finally:
        try:
            alias = alias_name(project)
            store.client.drop_alias(alias)
            store.client.drop_collection(f"{alias}_v1")
        finally:
            store.close()
            if started:
                devstack.down(settings, names=["milvus"])
    for name, lat in (("hybrid (dense + BM25, RRF)", hybrid), ("dense only", dense)):
        console.print(f"{name:>27}: p50 {lat.pct(50):8.1f} ms  p95 {lat.pct(95):8.1f} ms  "
                      f"mean {statistics.fmean(lat.ms):8.1f} ms  ({len(lat.ms)} queries, {window} candidates)")
    ratio = hybrid.pct(95) / dense.pct(95)
    console.print(f"chunks={chunks} flushed={flush} hybrid_p50_ms={hybrid.pct(50):.1f} dense_p50_ms={dense.pct(50):.1f} "
                  f"p50_ratio={hybrid.pct(50) / dense.pct(50):.2f}")
    console.print(f"hybrid_p95_ms={hybrid.pct(95):.1f} dense_p95_ms={dense.pct(95):.1f} ratio={ratio:.2f}")
    return hybrid, dense
