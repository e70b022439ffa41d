"""Triton Python-backend model: raw text in, all-MiniLM-L6-v2 vectors out.

Runs inside the Python backend stub with .venv-triton's packages (numpy<2,
onnxruntime, tokenizers).  Tokenisation happens here, so clients send raw UTF-8.

Tensors (per request; ``max_batch_size`` > 0, so the batch axis is implicit):

- input  ``TEXT``      TYPE_STRING (batch, 1) — UTF-8 text (invalid bytes replaced)
- output ``EMBEDDING`` TYPE_FP32   (batch, 384) — mean-pooled, L2-normalised

Files, from ``triton/export_embedder.py``: ``model.onnx`` and ``tokenizer.json`` in the
directory named by the config parameter ``model_dir`` (relative to this model's
directory; default: the version directory).  Other parameters:
``max_tokens`` (truncation, ≤ 256), ``run_batch`` (texts per ONNX Runtime run,
default 32), ``intra_op_threads`` (0 = one per core; the environment variable
``RAGSTREAM_TRITON_THREADS`` overrides it).

All requests of one dynamic batch are tokenised together, sorted by token count
and run in sub-batches padded to their own longest text, then scattered back.
"""
import json
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer


def _param(config, key, default):
    value = config.get("parameters", {}).get(key, {}).get("string_value")
    return default if value in (None, "") else value


class TritonPythonModel:
    """all-MiniLM-L6-v2 embedder (see module docstring)."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        model_home = Path(args["model_repository"])
        files = (model_home / _param(config, "model_dir", str(args["model_version"]))).resolve()
        if not (files / "model.onnx").is_file():
            raise pb_utils.TritonModelException(
                f"{files / 'model.onnx'} not found: run triton/export_embedder.py --output "
                f"{files / 'model.onnx'}")
        self.max_tokens = int(_param(config, "max_tokens", "256"))
        self.run_batch = int(_param(config, "run_batch", "32"))
        threads = int(os.environ.get("RAGSTREAM_TRITON_THREADS") or _param(config, "intra_op_threads", "0"))
        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # idle intra-op threads sleep instead of spinning: `ragstream bench spinning`
        # (20 batches of 4, 50 ms apart; 2-core VM) cost 3.0 core-s spinning, 1.4 not
        # (and 12.1 vs 10.1 for 10 batches of 32): CPU the parse processes need
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(files / "model.onnx"), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(files / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        self.tokenizer.no_padding()
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def _embed(self, texts):
        enc = self.tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in enc), dtype=np.int64, count=len(enc))
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.run_batch):
            idx = order[start:start + self.run_batch]
            seq = int(lengths[idx].max())
            ids = np.zeros((len(idx), seq), dtype=np.int64)
            mask = np.zeros((len(idx), seq), dtype=np.int64)
            for row, i in enumerate(idx):
                n = int(lengths[i])
                ids[row, :n] = enc[i].ids
                mask[row, :n] = 1
            out[idx] = self.session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        return out

    def execute(self, requests):
        texts, counts = [], []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            batch = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw]
            texts.extend(batch)
            counts.append(len(batch))
        try:
            vectors = self._embed(texts) if texts else np.zeros((0, self.dim), np.float32)
        except Exception as exc:  # one failure fails every request of this batch
            err = pb_utils.TritonError(f"embedding failed: {exc}")
            return [pb_utils.InferenceResponse(output_tensors=[], error=err) for _ in requests]
        responses, start = [], 0
        for n in counts:
            tensor = pb_utils.Tensor("EMBEDDING", vectors[start:start + n])
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
            start += n
        return responses

    def finalize(self):
        self.session = None
