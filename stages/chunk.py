"""Chunk stage: element dicts → chunk dicts with ``chunk_by_title``.

Defaults (DESIGN.md): max 3000 characters, a new chunk after 2400, sections under
500 characters combined.  Tables are kept out of text chunks: every Table element
becomes its own chunk (split by ``chunk_by_title`` when longer than the maximum), so
the enhance stage can render it and the index keeps its HTML.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

MAX_CHARACTERS = 3000
NEW_AFTER_N_CHARS = 2400
COMBINE_TEXT_UNDER_N_CHARS = 500


@dataclass(frozen=True)
class ChunkParams:
    """chunk_by_title parameters, in characters."""

    max_characters: int = MAX_CHARACTERS
    new_after_n_chars: int = NEW_AFTER_N_CHARS
    combine_text_under_n_chars: int = COMBINE_TEXT_UNDER_N_CHARS


def _runs(elements: list) -> Iterable[tuple[bool, list]]:
    """Split elements into consecutive runs: (is_table, [elements])."""
    run: list = []
    for el in elements:
        if el.category == "Table":
            if run:
                yield False, run
                run = []
            yield True, [el]
        else:
            run.append(el)
    if run:
        yield False, run


def _first_page(chunk) -> int:
    pages = [o.metadata.page_number for o in (chunk.metadata.orig_elements or [])
             if o.metadata.page_number]
    return min(pages) if pages else int(chunk.metadata.page_number or 0)


def _types(chunk) -> list[str]:
    seen: dict[str, None] = {}
    for o in chunk.metadata.orig_elements or [chunk]:
        seen.setdefault(o.category, None)
    return list(seen)


def chunk_elements(element_dicts: list[dict[str, Any]],
                   params: Optional[ChunkParams] = None) -> list[dict[str, Any]]:
    """Chunk unstructured element dicts (as from ``element.to_dict()``).

    Returns one dict per chunk, in document order: ``text`` (str, ≤ max_characters),
    ``page_number`` (int, first page of the chunk's elements; 0 if the format has no
    pages), ``element_types`` (list[str], distinct categories of the elements it came
    from), ``table_html`` (str | None, tables only).  Empty input → empty list.
    """
    from unstructured.chunking.title import chunk_by_title
    from unstructured.staging.base import elements_from_dicts

    params = params or ChunkParams()
    elements = [e for e in elements_from_dicts(element_dicts) if (e.text or "").strip()]
    out: list[dict[str, Any]] = []
    for is_table, run in _runs(elements):
        chunks = chunk_by_title(
            run,
            max_characters=params.max_characters,
            new_after_n_chars=params.new_after_n_chars,
            combine_text_under_n_chars=0 if is_table else params.combine_text_under_n_chars,
            include_orig_elements=True,
        )
        for ch in chunks:
            text = ch.text.strip()
            if not text:
                continue
            out.append({
                "text": text,
                "page_number": _first_page(ch),
                "element_types": ["Table"] if is_table else _types(ch),
                "table_html": (run[0].metadata.text_as_html if is_table else None),
            })
    return out
