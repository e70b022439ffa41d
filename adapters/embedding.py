"""The embedding interface every backend shares: the :class:`Embedder` protocol the
embed stage depends on, its width (:data:`DIM`), the token limit, the error type
and the input check.  Backends: :mod:`adapters.embedder` (ONNX Runtime, and the
factory) and :mod:`adapters.triton_embedder` (Triton over gRPC); both import this
module, neither imports the other at module level.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

#: output width of all-MiniLM-L6-v2 (hidden size in its config.json)
DIM = 384
#: sentence_bert_config.json max_seq_length; the shipped tokenizer.json says 128
MAX_TOKENS = 256


@runtime_checkable
class Embedder(Protocol):
    """What the embed stage needs from an embedding backend.

    ``dim``: vector width (384 for all-MiniLM-L6-v2).
    """

    dim: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 array of shape ``(len(texts), dim)``, each row L2
        normalised (norm 1 ± 1e-5), row i for ``texts[i]``.  An empty sequence gives
        shape ``(0, dim)``.  Raises ``TypeError`` for non-``str`` items and a
        backend-specific error (subclass of ``EmbedderError``) when inference fails."""
        ...

    async def cache_identity(self) -> str:
        """The embedding cache's model key: a short hex digest (16 characters) of the
        model actually loaded and every setting that changes its vectors (token
        limit, tokenizer, pooling); equal only when the vectors would be
        (adapters/model_identity.py)."""
        ...

    async def close(self) -> None:
        """Release sessions, threads and connections; idempotent."""
        ...


class EmbedderError(RuntimeError):
    """Embedding failed (model missing and not exportable, inference error, server)."""


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list; raises ``TypeError`` for a bare ``str`` or a non-``str`` item."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of strings, not a single str")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str")
    return out
