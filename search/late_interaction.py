"""Second stage: late interaction (MaxSim) over the embedder's own token vectors.

After the fused ranking (dense + BM25 by RRF, search/query.py), the first ``depth``
candidates are reordered by MaxSim: for each word piece of the query, the best cosine
with any word piece of the candidate, averaged over the query's word pieces.  The
token vectors are all-MiniLM-L6-v2's last hidden state — the ``token_embeddings``
output of the exported graph (triton/export_embedder.py), the very states the
chunk's and the query's embeddings are the mean of — with [CLS] and [SEP] dropped
and each row L2-normalised.  No second model and no training: a chunk whose one
sentence answers the question is no longer outvoted by the rest of its text, which
is what mean pooling does.

The candidate's text is its *embed text* (the collection's ``embed_text`` field:
enhance's document header + a table's ``column: value`` rendering), not the bare
chunk text.  Measured offline on the held-out ``dev`` half (bench/heldout/dev.jsonl,
234 questions, one ingest, 2-core VM, 2026-12-07; the fused order reproduced
exactly: recall@1/5/10 0.684/0.868/0.932): MaxSim over the top 20 with the token
vectors of the embed texts 0.744/0.902/0.936 (top 40: 0.739/0.902/0.936); with the
bare chunk texts 0.654/0.863/0.944 — worse than no second stage at recall@1, so a
collection without ``embed_text`` gets none (search says why).  Pipeline figures:
the README's retrieval section.

Cost: the candidates' token vectors are computed at query time (one forward pass of
``depth`` texts of up to 256 word pieces, in process), which on two CPU cores takes
far longer than the rest of a search — hence off by default
(``RAGSTREAM_SECOND_STAGE=none``).  Storing compressed token vectors at ingest would
make it cheap (offline on dev: PCA to 128 dimensions fitted on text outside the
held-out set, int8, kept 0.731/0.906).
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from search.lexical import dense_weight

#: the graph output with the per-token states (triton/export_embedder.py)
TOKEN_OUTPUT = "token_embeddings"
#: candidates reordered by default: the dev half's best depth (20 and 40 within one question)
DEPTH = 20


class NoEmbedText(LookupError):
    """Candidates from a collection made before the ``embed_text`` field."""


class EmbedderCannotRead(ValueError):
    """A query the embedder cannot read (≥ 50 % CJK letters, search/lexical.py's rule)."""


class TokenOutputMissing(RuntimeError):
    """The ONNX model at hand was exported before it had a ``token_embeddings`` output."""


def maxsim(query: np.ndarray, chunk: np.ndarray) -> float:
    """MaxSim of two token matrices, float32 ``(m, d)`` and ``(n, d)`` with unit rows:
    the mean over the query's m rows of the largest inner product with a chunk row;
    in [-1, 1].  0.0 when either has no row (an empty text)."""
    if not len(query) or not len(chunk):
        return 0.0
    return float((query @ chunk.T).max(axis=1).mean())


class TokenEncoder:
    """Token vectors of texts from the exported all-MiniLM-L6-v2 graph, in process.

    ``model_path``: the ONNX export (default: the embedder's, adapters/embedder.py);
    ``max_tokens``: word-piece limit per text (256, as the embedder).  Thread-safe;
    the session loads on first use.  Raises :class:`TokenOutputMissing` when the
    model has no ``token_embeddings`` output (re-run ``triton/export_embedder.py``)."""

    def __init__(self, model_path: Optional[str | Path] = None, max_tokens: int = 256,
                 intra_op_threads: int = 0) -> None:
        from adapters.embedder import DEFAULT_ONNX_PATH

        self.model_path = Path(model_path) if model_path else DEFAULT_ONNX_PATH
        self.max_tokens, self.intra_op_threads = max_tokens, intra_op_threads
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            from adapters.embedder import cpu_session, load_tokenizer

            session = cpu_session(self.model_path, self.intra_op_threads)
            if TOKEN_OUTPUT not in {o.name for o in session.get_outputs()}:
                raise TokenOutputMissing(
                    f"{self.model_path} has no {TOKEN_OUTPUT!r} output (exported before it existed): "
                    f"run `.venv/bin/python triton/export_embedder.py --output {self.model_path}`")
            self._tokenizer = load_tokenizer(self.max_tokens, pad=False)
            self._session = session

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One float32 ``(n_i, 384)`` matrix per text: the states of its word pieces
        ([CLS]/[SEP] dropped; truncated at ``max_tokens``), rows L2-normalised.  Texts
        run in one padded batch."""
        if not texts:
            return []
        self._load()
        enc = self._tokenizer.encode_batch(list(texts))
        seq = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), seq), dtype=np.int64)
        mask = np.zeros((len(enc), seq), dtype=np.int64)
        for row, e in enumerate(enc):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = 1
        states = self._session.run([TOKEN_OUTPUT], {"input_ids": ids, "attention_mask": mask})[0]
        out = []
        for row, e in enumerate(enc):
            h = states[row, 1:len(e.ids) - 1].astype(np.float32)
            out.append(h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12))
        return out


_encoders: dict[tuple[str, int], TokenEncoder] = {}
_encoders_lock = threading.Lock()


def shared_encoder(model_path: Optional[str | Path], max_tokens: int) -> TokenEncoder:
    """One :class:`TokenEncoder` per model file and token limit per process (the API
    searches with it on every query; loading the session takes about a second)."""
    key = (str(model_path or ""), max_tokens)
    with _encoders_lock:
        if key not in _encoders:
            _encoders[key] = TokenEncoder(model_path, max_tokens)
        return _encoders[key]


def reorder(query: str, hits: list[dict[str, Any]], encoder: TokenEncoder,
            depth: int = DEPTH) -> list[dict[str, Any]]:
    """``hits`` (best first, each with ``embed_text``: the text the embedder read, a
    field of collections made since 2026-12-07) with the first
    ``depth`` reordered by MaxSim of ``query`` and that text (stable: equal scores keep
    their fused order), each of them given ``late_score``; the rest follow unchanged.
    Raises :class:`NoEmbedText` when a hit has no ``embed_text`` (an older collection:
    MaxSim over the bare text ranks worse than the fused order, see above) and
    :class:`EmbedderCannotRead` for a query of ≥ 50 % CJK letters, whose fused order
    BM25 leads (``search.lexical.dense_weight`` 0): the English-only embedder's token
    vectors undid it (dev CJK recall@5 0.733 → 0.533 before this rule)."""
    head, tail = hits[:depth], hits[depth:]
    if len(head) < 2:
        return list(hits)
    if dense_weight(query) == 0.0:
        raise EmbedderCannotRead("a CJK query: the embedder (English-only) cannot read it, so its "
                                 "token vectors would undo BM25's order")
    if any("embed_text" not in h for h in head):
        raise NoEmbedText("the collection has no embed_text field (made before it): "
                          "`ragstream reindex` builds one that has")
    vectors = encoder.encode([query] + [h["embed_text"] or h.get("text") or "" for h in head])
    scored = [{**h, "late_score": maxsim(vectors[0], v)} for h, v in zip(head, vectors[1:])]
    return sorted(scored, key=lambda h: -h["late_score"]) + tail
