"""The int8 embedder against the float one, in process, same run
(``ragstream bench int8``).

Speed: for each case — ``batch`` texts of about ``tokens`` word pieces (bench/embed.py's
pseudo-sentences; 300 is truncated to the model's 256) — both models embed the same
texts, the order alternating per repeat; a case's figure is the best of ``repeats``
runs in chunks/s (:func:`bench.embed.chunks_per_s`: texts / wall seconds of one
``embed`` call, tokenisation included).  Both use one ONNX Runtime session with the
same threads and sub-batch of 32.

Agreement: the cosine between the two models' vectors of every text of the cases,
and of real sentences (:data:`PASSAGES` and :data:`QUERIES`).  Retrieval on documents
is measured with the retrieval sets instead (README: re-embed a project with ``ragstream reindex
--embedder onnx`` under ``RAGSTREAM_EMBEDDER_PRECISION=int8``, then ``ragstream eval
retrieval``).

Last line: ``int8_vs_fp32=<lowest speed ratio> cos_min=<x> cos_mean=<y>``.
"""
from __future__ import annotations

import asyncio
import os
import platform

import numpy as np

from adapters.embedder import OnnxEmbedder
from bench.embed import chunks_per_s, make_texts

# eight passages and a question for each (question i is answered by passage i): the
# agreement check here and in tests/test_int8_embedder.py
PASSAGES = [
    "The pump station used 12% less energy in 2025 than in 2024.",
    "Invoices are due within thirty days of the delivery date.",
    "Kafka consumer groups share the partitions of a topic among their members.",
    "The board approved a new dividend policy at its March meeting.",
    "Patients should fast for eight hours before the blood test.",
    "Milvus stores vectors in collections with a schema of fields.",
    "Rainfall in the northern region doubled over the last decade.",
    "The contract may be terminated by either party with notice in writing.",
]
QUERIES = [
    "how much less energy did the pumps use",
    "when must invoices be paid",
    "how do consumers split partitions",
    "what did the board decide about dividends",
    "how long to fast before a blood test",
    "where does Milvus keep vectors",
    "how did rainfall change in the north",
    "how can the contract be ended",
]


async def _best_of(fp32: OnnxEmbedder, int8: OnnxEmbedder, texts: list[str], repeats: int) -> dict[str, float]:
    """Each model's best chunks/s over ``repeats`` runs on ``texts``, the order alternating."""
    best = {"fp32": 0.0, "int8": 0.0}
    for r in range(repeats):
        order = (("fp32", fp32), ("int8", int8)) if r % 2 == 0 else (("int8", int8), ("fp32", fp32))
        for name, emb in order:
            best[name] = max(best[name], await chunks_per_s(emb, texts))
    return best


def bench_int8(*, repeats: int = 3, batches=(64, 256), tokens=(50, 300), threads: int = 0,
               log=print) -> float:
    """Run the cases and return the lowest int8/fp32 chunks/s ratio; prints one line
    per case, the machine, and the summary line last (module docstring)."""
    fp32 = OnnxEmbedder(intra_op_threads=threads)
    int8 = OnnxEmbedder(intra_op_threads=threads, precision="int8")
    warm = make_texts(8, 50, seed=99)
    fp32.embed_sync(warm), int8.embed_sync(warm)  # loads both (int8: quantized if missing)
    log(f"machine: {platform.machine()} {os.cpu_count()} CPUs; onnxruntime CPU, intra-op threads "
        f"{threads or 'one per core'}; all-MiniLM-L6-v2 fp32 ({fp32.model_path.stat().st_size / 1e6:.0f} MB) "
        f"vs int8 ({int8.model_path.stat().st_size / 1e6:.0f} MB); repeats={repeats} (best)")
    ratios, cosines = [], []
    for tok in tokens:
        for batch in batches:
            texts = make_texts(batch, tok)
            best = asyncio.run(_best_of(fp32, int8, texts, repeats))
            cosines.append((fp32.embed_sync(texts) * int8.embed_sync(texts)).sum(axis=1))
            ratios.append(best["int8"] / best["fp32"])
            log(f"batch={batch:<4} tokens~{tok:<4} fp32={best['fp32']:8.1f} chunks/s  "
                f"int8={best['int8']:8.1f} chunks/s  ratio={ratios[-1]:.3f}")
    real = PASSAGES + QUERIES
    real_cos = (fp32.embed_sync(real) * int8.embed_sync(real)).sum(axis=1)
    log(f"real sentences ({len(real)}): cosine min {real_cos.min():.4f} mean {real_cos.mean():.4f}")
    cos = np.concatenate(cosines)
    line = f"int8_vs_fp32={min(ratios):.3f} cos_min={cos.min():.4f} cos_mean={cos.mean():.4f}"
    log(line)
    return min(ratios)
