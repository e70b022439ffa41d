"""Chunk-level messages (chunk → enhance → embed → index), one event per chunk.

Chunk ids are deterministic: ``{document_id}:{version}:{index}``, so redelivery and
replay upsert the same Milvus primary keys.
"""
from __future__ import annotations

from typing import Optional

import faust

from schemas import codec


def chunk_id(document_id: str, version: int, index: int) -> str:
    """The primary key of a chunk: ``{document_id}:{version}:{index}``."""
    return f"{document_id}:{version}:{index}"


class Chunk(faust.Record, serializer=codec.CODEC_NAME):
    """One chunk of one document version.

    ``text`` is what ``chunk_by_title`` produced; ``embed_text`` is what the embed
    stage embeds (set by enhance: the text itself, or a rendering of a table/image).
    ``index`` is 0-based, ``total`` the number of chunks in this version.
    ``page_number`` is 1-based (0 when the format has no pages).
    ``image_keys``: ``s3://bucket/key`` references of the image crops the chunk shows
    (image chunks; kept by partition, ``adapters.object_keys.image_key``).
    ``summary``: the vision-language model's short summary of a table or image chunk
    (enhance, when a VLM is configured; also at the head of ``embed_text``).
    ``enrichment``: how enhance rendered the chunk, e.g. ``{"vlm": "ok", "model": "m"}``
    or ``{"vlm": "failed", "reason": "..."}`` (None: deterministic, no VLM asked).
    All three are optional, so records written before them still decode.
    """

    chunk_id: str
    document_id: str
    version: int
    index: int
    total: int
    project: str
    category: str
    filename: str
    text: str
    page_number: int
    element_types: list
    table_html: Optional[str] = None
    embed_text: Optional[str] = None
    callback_url: Optional[str] = None
    image_keys: list = []
    summary: Optional[str] = None
    enrichment: Optional[dict] = None
    bulk: bool = False  # in a project's burst: the bulk lane of every topic (topics/lanes.py)
    sealed: Optional[str] = None  # content fields sealed with the version's data key (schemas/sealing.py)
    schema_version: int = 1


class EmbeddedChunk(Chunk, serializer=codec.CODEC_NAME):
    """A chunk with its embedding: float32 list of length 384, L2-normalised."""

    vector: list = []
    embedding_model: str = ""
