"""Triton Python-backend tokenizer for the GPU ensembles (CPU).

Single texts (``pair`` = "false"): ``TEXT`` STRING (batch, 1) → ``input_ids``,
``attention_mask`` INT64 (batch, seq).  Pairs (``pair`` = "true"): ``TEXT`` and
``TEXT_PAIR`` → also ``token_type_ids``.  Each request is padded to its own longest
sequence (≤ ``max_tokens`` = 256), so the ONNX model's dynamic batcher merges only
requests of equal length; ingestion sends 256 texts per request anyway.
Reads ``tokenizer.json`` from the version directory (copied from the export).
"""
import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer


def _texts(request, name):
    raw = pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw]


class TritonPythonModel:
    """WordPiece tokenizer (see module docstring)."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value") for k, v in config.get("parameters", {}).items()}
        path = Path(args["model_repository"]) / str(args["model_version"]) / "tokenizer.json"
        self.tokenizer = Tokenizer.from_file(str(path))
        self.tokenizer.enable_truncation(max_length=int(params.get("max_tokens") or 256))
        self.tokenizer.enable_padding()
        self.pair = (params.get("pair") or "false").lower() == "true"

    def execute(self, requests):
        responses = []
        for request in requests:
            texts = _texts(request, "TEXT")
            items = list(zip(texts, _texts(request, "TEXT_PAIR"))) if self.pair else texts
            enc = self.tokenizer.encode_batch(items)
            outs = [
                pb_utils.Tensor("input_ids", np.asarray([e.ids for e in enc], dtype=np.int64)),
                pb_utils.Tensor("attention_mask", np.asarray([e.attention_mask for e in enc], dtype=np.int64)),
            ]
            if self.pair:
                outs.append(pb_utils.Tensor("token_type_ids", np.asarray([e.type_ids for e in enc], dtype=np.int64)))
            responses.append(pb_utils.InferenceResponse(output_tensors=outs))
        return responses
