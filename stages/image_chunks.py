"""Image chunks: one chunk per extracted image whose crop partition kept in object
storage, so the enhance stage can have a vision-language model describe it.

``stages.chunk`` drops elements without text, and a PDF Image element has none (its
payload was the crop), so images never reached a chunk.  Partition
(``agents.partition``) stores each crop as an object and leaves its
``s3://bucket/key`` reference in the element's ``metadata.image_key``; the chunk
agent adds :func:`image_chunks` after the text and table chunks when the document's
profile has ``use_vlm`` and a model is configured (without one an image chunk would
carry no searchable text, only a placeholder).
"""
from __future__ import annotations

from typing import Any

#: the text of an image chunk whose element has none (page 0: no pages)
PLACEHOLDER = "Image on page {page}"


def image_chunks(element_dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One chunk dict per Image element dict with ``metadata.image_key``, in order:
    ``text`` (the element's own text, e.g. OCR, else ``"Image on page N"``),
    ``page_number`` (int, 0 when unknown), ``element_types`` ``["Image"]``,
    ``table_html`` None, ``image_keys`` ``[the reference]``.  The same keys as
    ``stages.chunk.chunk_elements`` gives, plus ``image_keys``."""
    out = []
    for el in element_dicts:
        meta = el.get("metadata") or {}
        key = meta.get("image_key")
        if el.get("type") != "Image" or not key:
            continue
        page = int(meta.get("page_number") or 0)
        text = " ".join((el.get("text") or "").split()) or PLACEHOLDER.format(page=page)
        out.append({"text": text, "page_number": page, "element_types": ["Image"],
                    "table_html": None, "image_keys": [key]})
    return out
