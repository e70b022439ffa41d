#!/usr/bin/env python
"""Export a BERT-style cross-encoder to ONNX for the Triton ``reranker`` model.

No cross-encoder weights can be downloaded here, so two sources:

- ``--tiny-random`` (default): a randomly initialised ``BertForSequenceClassification``
  (``num_labels=1``; 2 layers, hidden 64, 2 heads, intermediate 128; seed 0) built
  from a transformers ``BertConfig`` with all-MiniLM-L6-v2's uncased WordPiece
  tokenizer (vocab 30522).  Its scores are meaningless but deterministic: it
  exercises the real serving path end to end.
- ``--from DIR``: a local Hugging Face cross-encoder directory (``config.json``,
  weights, ``tokenizer.json``), e.g. ``cross-encoder/ms-marco-MiniLM-L-6-v2`` copied
  from a machine with hub access.

Graph: inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` int64 (batch, seq),
dynamic axes; output ``score`` float32 (batch,) — the single logit.  Written to
``OUTPUT_DIR/model.onnx`` with ``tokenizer.json`` (pair truncation at 256 tokens)
beside it.  Default OUTPUT_DIR: ``triton/reranker/1`` (gitignored binaries); point the
server at another directory with ``RAGSTREAM_RERANKER_DIR``.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = REPO_ROOT / "triton" / "reranker" / "1"
_EMB = runpy.run_path(str(REPO_ROOT / "triton" / "export_embedder.py"))  # also isolates imports
MAX_TOKENS = 256


def build_tiny_random(seed: int = 0):
    """(model, tokenizer.json text) for a tiny random cross-encoder."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128,
                        max_position_embeddings=512, num_labels=1)
    model = BertForSequenceClassification(config)
    return model, _EMB["tokenizer_json"](MAX_TOKENS)


def load_pretrained(path: Path):
    """(model, tokenizer.json text) from a local cross-encoder directory."""
    from tokenizers import Tokenizer
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(path), attn_implementation="eager")
    tok = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.enable_padding()
    return model, tok.to_str()


def export(model, tokenizer_json: str, out_dir: Path) -> Path:
    """Write ``out_dir/model.onnx`` (atomically) and ``out_dir/tokenizer.json``."""
    import torch

    class Score(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).logits[:, 0]

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    wrapped = Score(model.eval()).eval()
    ids = torch.tensor([[101, 2054, 102, 7592, 102], [101, 2054, 102, 7592, 0]], dtype=torch.int64)
    mask = (ids != 0).to(torch.int64)
    types = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 1, 0]], dtype=torch.int64)
    tmp = out_dir / f".model.onnx.{os.getpid()}"
    with torch.inference_mode():
        torch.onnx.export(wrapped, (ids, mask, types), str(tmp),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["score"],
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in
                                        ("input_ids", "attention_mask", "token_type_ids")} | {"score": {0: "batch"}},
                          opset_version=17, do_constant_folding=True, dynamo=False)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out_dir / "model.onnx")
    tok_tmp = out_dir / f".tokenizer.json.{os.getpid()}"
    tok_tmp.write_text(tokenizer_json, encoding="utf-8")
    os.replace(tok_tmp, out_dir / "tokenizer.json")
    return out_dir / "model.onnx"


def main(argv: list[str] | None = None) -> int:
    """CLI; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--tiny-random", action="store_true", default=True)
    src.add_argument("--from", dest="source", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", type=Path, default=DEFAULT_DIR)
    args = p.parse_args(argv)
    model, tok = load_pretrained(args.source) if args.source else build_tiny_random(args.seed)
    out = export(model, tok, args.output_dir)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) and {out.parent / 'tokenizer.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
