"""GPU check: all-MiniLM-L6-v2 chunks/s at batch 256 for ~256-token chunks.

One prepared command for a machine with an NVIDIA GPU (finishes in well under 8
minutes; every stage has its own time budget)::

    .venv/bin/python -m bench.gpu_check            # --device cpu to dry-run anywhere

Stages, each skipped with a printed reason when its requirement is missing:

1. export the embedder to ONNX (``triton/export_embedder.py``; offline);
2. torch on the device (FP16 on CUDA, FP32 on CPU), the exported graph's torch twin —
   model-only throughput, inputs already on the device;
3. ONNX Runtime with ``CUDAExecutionProvider`` (onnxruntime-gpu), FP32 graph;
4. Triton over gRPC when a server answers at ``--triton-url`` (e.g. ``tritonserver
   --model-repository=triton/gpu``), end to end with tokenisation in the server.

chunks/s = texts / wall seconds, median of ``--iters`` timed runs after warm-up
(``torch.cuda.synchronize()`` before reading the clock).  Prints one line per stage
and ``gpu_check=ok`` last when at least one measurement ran.
"""
from __future__ import annotations

import argparse
import json
import runpy
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _texts(n: int, tokens: int) -> list[str]:
    from bench.embed import make_texts

    return make_texts(n, tokens)


def _median_rate(fn, n: int, iters: int, sync=lambda: None) -> float:
    times = []
    for _ in range(iters):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    """CLI; see the module docstring.  Exit 0 when at least one stage measured."""
    p = argparse.ArgumentParser(prog="python -m bench.gpu_check")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--onnx", type=Path, default=REPO_ROOT / "triton" / "embedder" / "1" / "model.onnx")
    p.add_argument("--triton-url", default="127.0.0.1:8001")
    args = p.parse_args(argv)
    exp = runpy.run_path(str(REPO_ROOT / "triton" / "export_embedder.py"))  # isolates imports
    import numpy as np

    results: dict[str, float] = {}
    t0 = time.perf_counter()
    if not args.onnx.exists():
        exp["export"](args.onnx)
    print(f"export: {args.onnx} ready in {time.perf_counter() - t0:.1f} s", flush=True)

    texts = _texts(args.batch, args.tokens)
    from adapters.embedder import load_tokenizer

    enc = load_tokenizer().encode_batch(texts)
    ids = np.asarray([e.ids for e in enc], dtype=np.int64)
    mask = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
    print(f"input: batch {ids.shape[0]} x {ids.shape[1]} tokens", flush=True)

    import torch

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("torch: CUDA not available; falling back to --device cpu", flush=True)
        device = "cpu"
    model = exp["_load_torch_encoder"]()
    dtype = torch.float16 if device == "cuda" else torch.float32
    model = model.to(device=device, dtype=dtype).eval()
    tids, tmask = torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    with torch.inference_mode():
        ref = model(tids, tmask).float().cpu().numpy()
        model(tids, tmask)
        iters = args.iters if device == "cuda" else max(1, min(args.iters, 2))
        rate = _median_rate(lambda: model(tids, tmask), len(texts), iters, sync)
    results[f"torch_{device}_{str(dtype).split('.')[-1]}"] = rate
    print(f"torch {name} {dtype}: {rate:,.0f} chunks/s", flush=True)

    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        sess = ort.InferenceSession(str(args.onnx), providers=["CUDAExecutionProvider"])
        feed = {"input_ids": ids, "attention_mask": mask}
        got = sess.run(["embedding"], feed)[0]
        cos = float((got * ref).sum(1).min())
        rate = _median_rate(lambda: sess.run(["embedding"], feed), len(texts), args.iters)
        results["onnxruntime_cuda_fp32"] = rate
        print(f"onnxruntime CUDA EP fp32: {rate:,.0f} chunks/s (min cosine vs torch {cos:.5f})", flush=True)
    else:
        print(f"onnxruntime: no CUDAExecutionProvider ({ort.get_available_providers()}); skipped", flush=True)

    try:
        import asyncio

        from adapters.triton_embedder import TritonEmbedder

        async def via_triton() -> float:
            emb = TritonEmbedder(args.triton_url, timeout_s=120, retry_s=0.5)
            try:
                await emb.embed(texts)
                times = []
                for _ in range(max(1, args.iters // 2)):
                    t = time.perf_counter()
                    await emb.embed(texts)
                    times.append(time.perf_counter() - t)
                return len(texts) / statistics.median(times)
            finally:
                await emb.close()

        rate = asyncio.run(via_triton())
        results["triton_grpc"] = rate
        print(f"triton gRPC {args.triton_url}: {rate:,.0f} chunks/s (tokenisation included)", flush=True)
    except Exception as exc:  # noqa: BLE001 - optional stage
        print(f"triton: not measured ({type(exc).__name__}: {str(exc)[:120]})", flush=True)

    print(json.dumps({"device": name, "batch": args.batch, "tokens": int(ids.shape[1]),
                      "chunks_per_s": {k: round(v, 1) for k, v in results.items()},
                      "total_s": round(time.perf_counter() - t0, 1)}), flush=True)
    print("gpu_check=ok" if results else "gpu_check=failed")
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
