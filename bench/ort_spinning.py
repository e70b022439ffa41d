"""CPU cost of ONNX Runtime's spinning intra-op threads, with and without, same run.

ONNX Runtime's intra-op thread pool spins (busy-waits) after each run by default
(``session.intra_op.allow_spinning`` = 1), which on a 2-core machine takes CPU from
the parse processes while the embed stage sends small batches with gaps between
them.  This harness embeds the same stream — ``batches`` batches of ``batch_size``
texts of 200–750 characters, ``gap_ms`` apart, through the exported
all-MiniLM-L6-v2 graph (``triton/embedder/1/model.onnx``, the one Triton serves) —
in a fresh subprocess per setting, alternating the settings for ``repeats`` rounds.

Figures per run: wall seconds and CPU seconds (user + system of that process,
``resource.getrusage``) of the timed stream, after one untimed warm-up batch.
Last line: ``ort_spinning cpu_on_s=<best> cpu_off_s=<best> cpu_ratio=<off/on>``.

Run: ``ragstream bench spinning`` or ``.venv/bin/python -m bench.ort_spinning``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

_CHILD = r"""
import json, resource, sys, time
import numpy as np, onnxruntime as ort
from adapters.embedder import DEFAULT_ONNX_PATH, load_tokenizer
spin, batches, size, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
opts = ort.SessionOptions(); opts.inter_op_num_threads = 1
opts.add_session_config_entry("session.intra_op.allow_spinning", spin)
session = ort.InferenceSession(str(DEFAULT_ONNX_PATH), sess_options=opts,
                               providers=["CPUExecutionProvider"])
tok = load_tokenizer()
names = {i.name for i in session.get_inputs()}
base = "The Riverside plant reported quarterly energy use in kWh for each line. " * 12
texts = [base[: 200 + (37 * i) % 550] for i in range(batches * size)]
def run(batch):
    enc = tok.encode_batch(batch)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64)}
    if "token_type_ids" in names:
        feed["token_type_ids"] = np.zeros_like(ids)
    session.run(None, feed)
run(texts[:size])
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for k in range(0, len(texts), size):
    run(texts[k:k + size])
    time.sleep(gap)
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"wall_s": t1 - t0, "cpu_s": cpu}))
"""


def _one(spin: bool, batches: int, batch_size: int, gap_ms: float) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, "1" if spin else "0", str(batches),
                          str(batch_size), str(gap_ms / 1000)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_spinning(*, repeats: int = 2, batches: int = 20, batch_size: int = 4,
                   gap_ms: float = 50.0, echo=print) -> dict:
    """Run the stream ``repeats`` times per setting (alternating) and print each run
    and the best CPU seconds per setting; returns ``{"on": [...], "off": [...]}``
    (each a list of ``{"wall_s", "cpu_s"}``)."""
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for r in range(repeats):
        for setting in (("on", "off") if r % 2 == 0 else ("off", "on")):
            fig = _one(setting == "on", batches, batch_size, gap_ms)
            runs[setting].append(fig)
            echo(f"spinning={setting:3} run={r + 1} wall_s={fig['wall_s']:.2f} cpu_s={fig['cpu_s']:.2f}")
    on = min(f["cpu_s"] for f in runs["on"])
    off = min(f["cpu_s"] for f in runs["off"])
    echo(f"ort_spinning cpu_on_s={on:.2f} cpu_off_s={off:.2f} cpu_ratio={off / on:.2f}")
    return runs


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--gap-ms", type=float, default=50.0)
    a = ap.parse_args(argv)
    started = time.perf_counter()
    bench_spinning(repeats=a.repeats, batches=a.batches, batch_size=a.batch_size, gap_ms=a.gap_ms)
    print(f"took {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
