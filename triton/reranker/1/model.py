"""Triton Python-backend model: (query, passage) pairs in, one relevance score each.

- inputs  ``QUERY``   TYPE_STRING (batch, 1), ``PASSAGE`` TYPE_STRING (batch, 1)
- output  ``SCORE``   TYPE_FP32   (batch, 1) — the cross-encoder's logit (higher =
  more relevant; unbounded, not a probability)

Weights: ``model.onnx`` + ``tokenizer.json`` from ``triton/export_reranker.py`` in the
directory named by the environment variable ``RAGSTREAM_RERANKER_DIR`` (set by
``devstack/triton.py`` from ``settings.reranker_dir``), else the config
parameter ``model_dir`` (relative to this model's directory; default the version
directory).  Pairs are truncated to ``max_tokens`` (256) word pieces, longest
sequence first; all pairs of one dynamic batch run in sub-batches of ``run_batch``.
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


def _texts(request, name):
    raw = pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw]


class TritonPythonModel:
    """Cross-encoder reranker (see module docstring)."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        home = Path(args["model_repository"])
        files = Path(os.environ.get("RAGSTREAM_RERANKER_DIR")
                     or home / _param(config, "model_dir", str(args["model_version"]))).resolve()
        if not (files / "model.onnx").is_file():
            raise pb_utils.TritonModelException(
                f"{files / 'model.onnx'} not found: run triton/export_reranker.py --output-dir {files}")
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
        self.session = ort.InferenceSession(str(files / "model.onnx"), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(files / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=int(_param(config, "max_tokens", "256")))
        self.tokenizer.enable_padding()

    def execute(self, requests):
        pairs, counts = [], []
        for request in requests:
            q, p = _texts(request, "QUERY"), _texts(request, "PASSAGE")
            if len(q) != len(p):
                counts.append(None)
                continue
            pairs.extend(zip(q, p))
            counts.append(len(q))
        try:
            scores = np.empty(len(pairs), dtype=np.float32)
            for start in range(0, len(pairs), self.run_batch):
                enc = self.tokenizer.encode_batch(pairs[start:start + self.run_batch])
                feed = {
                    "input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.asarray([e.type_ids for e in enc], dtype=np.int64),
                }
                scores[start:start + len(enc)] = self.session.run(["score"], feed)[0]
        except Exception as exc:
            err = pb_utils.TritonError(f"reranking failed: {exc}")
            return [pb_utils.InferenceResponse(output_tensors=[], error=err) for _ in requests]
        responses, start = [], 0
        for n in counts:
            if n is None:
                err = pb_utils.TritonError("QUERY and PASSAGE must have the same batch size")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=err))
                continue
            out = pb_utils.Tensor("SCORE", scores[start:start + n].reshape(n, 1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
            start += n
        return responses

    def finalize(self):
        self.session = None
