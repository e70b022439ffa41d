"""Embedding throughput: Triton (gRPC, Python-backend ONNX Runtime) vs in-process ONNX Runtime.

Four cases — batch 64 and 256, chunks of ~50 and ~300 word pieces (300 is truncated
to the model's 256) — each run through both backends in one process, alternating
backend order per repeat; a case's figure is the best of ``repeats`` runs
(chunks/s = texts / wall seconds of one ``embed()`` call, tokenisation included for
both).  Both backends use the same exported graph, the same sub-batch of 32 and
ONNX Runtime's default intra-op threads, so the ratio measures serving overhead.

It starts a tritonserver on the configured ports when none answers there, and
stops it afterwards.  The last line printed is ``triton_vs_inprocess=<ratio>``, the
lowest Triton/in-process ratio across the four cases (goal ≥ 0.95).

Run: ``.venv/bin/python -m bench.embed`` (or ``ragstream bench embed``, which calls
:func:`bench_embed`).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import time
from dataclasses import dataclass

from adapters.embedder import OnnxEmbedder, load_tokenizer
from adapters.triton_embedder import TritonEmbedder
from streams.settings import Settings, get_settings
from devstack.triton import TritonServer, server_ready

WORDS = ("document chunk retrieval index vector query kafka stream partition topic "
         "consumer offset replay embedding model server batch latency throughput table "
         "image summary invoice contract policy report revenue quarter customer region "
         "storage bucket object metadata status version project category upload").split()


@dataclass
class CaseResult:
    """One case: ``batch`` texts of ``tokens`` word pieces each (measured mean)."""

    batch: int
    tokens: int
    inprocess_cps: float
    triton_cps: float

    @property
    def ratio(self) -> float:
        """Triton chunks/s divided by in-process chunks/s."""
        return self.triton_cps / self.inprocess_cps


def make_texts(n: int, tokens: int, seed: int = 0) -> list[str]:
    """``n`` deterministic pseudo-sentences of about ``tokens`` word pieces each
    (including [CLS]/[SEP]); capped at 256 by the tokenizer's truncation."""
    rng = random.Random(seed * 1000 + tokens)
    tok = load_tokenizer(pad=False)
    tok.no_truncation()  # measure the full length (the embedders truncate at 256)
    texts = []
    for i in range(n):
        words = [f"chunk{i}"]
        while True:
            words.extend(rng.choice(WORDS) for _ in range(4))
            text = " ".join(words)
            if len(tok.encode(text).ids) >= tokens:
                break
        texts.append(text)
    return texts


async def chunks_per_s(embedder, texts: list[str]) -> float:
    """``len(texts)`` / wall seconds of one ``embedder.embed(texts)`` call (tokenisation
    included); asserts the result is ``(len(texts), 384)``."""
    t0 = time.perf_counter()
    out = await embedder.embed(texts)
    dt = time.perf_counter() - t0
    assert out.shape == (len(texts), 384)
    return len(texts) / dt


async def run_cases(grpc_url: str, batches=(64, 256), tokens=(50, 300), repeats: int = 2,
                    model: str = "embedder", log=print) -> list[CaseResult]:
    """Measure every (batch, tokens) case; see the module docstring."""
    onnx = OnnxEmbedder(batch_size=32)
    triton = TritonEmbedder(grpc_url, model, timeout_s=600)
    results = []
    try:
        warm = make_texts(8, 50, seed=99)
        await onnx.embed(warm)
        await triton.embed(warm)
        for tok in tokens:
            for batch in batches:
                texts = make_texts(batch, tok)
                best_o = best_t = 0.0
                for r in range(repeats):
                    if r % 2 == 0:
                        best_o = max(best_o, await chunks_per_s(onnx, texts))
                        best_t = max(best_t, await chunks_per_s(triton, texts))
                    else:
                        best_t = max(best_t, await chunks_per_s(triton, texts))
                        best_o = max(best_o, await chunks_per_s(onnx, texts))
                res = CaseResult(batch, tok, best_o, best_t)
                log(f"batch={batch:<4} tokens~{tok:<4} in-process={best_o:8.1f} chunks/s  "
                    f"triton={best_t:8.1f} chunks/s  ratio={res.ratio:.3f}")
                results.append(res)
    finally:
        await onnx.close()
        await triton.close()
    return results


def bench_embed(settings: Settings | None = None, *, repeats: int = 2,
                batches=(64, 256), tokens=(50, 300), log=print) -> float:
    """Run the benchmark (starting Triton if needed) and return the lowest ratio;
    prints one line per case, the machine, and ``triton_vs_inprocess=<ratio>`` last."""
    settings = settings or get_settings()
    server = None
    if not server_ready(settings.triton_http_port):
        server = TritonServer(settings, models=["embedder"]).start()
    try:
        log(f"machine: {platform.machine()} {os.cpu_count()} CPUs, {platform.processor() or platform.platform()}; "
            f"onnxruntime CPU, model all-MiniLM-L6-v2 (max 256 tokens); repeats={repeats} (best)")
        results = asyncio.run(run_cases(
            f"127.0.0.1:{settings.triton_grpc_port}", batches, tokens, repeats, log=log))
    finally:
        if server is not None:
            server.stop()
    ratio = min(r.ratio for r in results)
    log(f"triton_vs_inprocess={ratio:.3f}")
    return ratio


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m bench.embed [--repeats N] [--batches 64,256] [--tokens 50,300]``."""
    p = argparse.ArgumentParser(prog="python -m bench.embed", description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--batches", default="64,256")
    p.add_argument("--tokens", default="50,300")
    args = p.parse_args(argv)
    bench_embed(repeats=args.repeats,
                batches=tuple(int(x) for x in args.batches.split(",")),
                tokens=tuple(int(x) for x in args.tokens.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
