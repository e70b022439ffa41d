"""Chunk stage: element dicts → chunk dicts whose embed text the embedder reads whole.

The embedder (all-MiniLM-L6-v2) reads at most ``max_tokens`` word pieces of a text
(256, ``stages.tokens.EMBEDDER_MAX_TOKENS``; ``settings.embedder_max_tokens``) and
silently drops the rest, so every chunk's embed text is kept within that limit,
counted with the embedder's own tokenizer (``stages.tokens.count_word_pieces``):

1. Text between tables is chunked with ``chunk_by_title``, its character sizes
   derived from the limit (:func:`char_sizes`): the run's own characters per word
   piece (≈ 4.5 for English prose, ≈ 3.2 for Markdown/code, ≈ 0.6 for Korean, whose
   syllables the tokenizer splits into jamo) × (``max_tokens`` − 2 special tokens)
   × ``fill`` 0.9 (a margin, since density varies within a run) gives
   ``max_characters``, clamped to [``min_characters`` 100, ``max_characters`` 3000,
   the previous fixed size (../shared/DESIGN.md), which also bounds a chunk's stored text];
   a new chunk after 4/5 of it and sections under 1/6 of it combined (the ratios of
   the former 3000 / 2400 / 500 defaults).
2. Before that, an element longer than the soft maximum (4/5 of the size, or
   ``fill`` × the limit in word pieces) is cut into elements of that size at
   sentences, then words, then characters (``stages.split.split_text``), so a
   section's title still joins its first piece.  A chunk still over the limit after
   ``chunk_by_title`` is split the same way, each piece keeping the page and element
   types of the elements it came from.
3. Every Table element becomes its own chunk(s) (``stages.table_split``): split by
   rows with the header row repeated, each piece's ``table_html`` holding only the
   header and its rows, so each rendering fits and pieces embed differently.

With ``ChunkParams.fit_to_embedder`` False (a profile's ``chunking="characters"``) the
word pieces are not counted: ``chunk_by_title`` at fixed ``max_characters`` / 4/5 / 1/6
of it (3,000 / 2,400 / 500, unstructured's defaults), no element split beforehand
(``chunk_by_title`` cuts one over ``max_characters`` itself); the embedder then reads each chunk's first ``max_tokens`` word
pieces and drops the rest, as unstructured-ingest does.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from stages.enhance import embed_text_for
from stages.split import split_text
from stages.table_split import split_table
from stages.tokens import EMBEDDER_MAX_TOKENS, SPECIAL_TOKENS, count_word_pieces

#: the former fixed chunk size (../shared/DESIGN.md): now the cap on a chunk's characters
MAX_CHARACTERS = 3000
#: floor of the derived chunk size, so a dense run still gets title-aware chunks
MIN_CHARACTERS = 100
#: fraction of the token limit a ``chunk_by_title`` chunk aims for (margin for density)
FILL = 0.9

CountTokens = Callable[[str], int]


def highest_page(elements: list[dict]) -> int:
    """The highest ``page_number`` among element dicts (0 when none has one): a
    document's page count when its parts or page ranges are joined."""
    return max((e.get("metadata", {}).get("page_number") or 0 for e in elements), default=0)

@dataclass(frozen=True)
class ChunkParams:
    """Chunk sizing: ``max_tokens`` (word pieces the embedder reads, special tokens
    included), ``max_characters`` (cap on any chunk's text), ``min_characters``
    (floor of the derived ``chunk_by_title`` size), ``fill`` (0 < fill ≤ 1),
    ``fit_to_embedder`` (False: sizes in characters only, see the module docstring)."""

    max_tokens: int = EMBEDDER_MAX_TOKENS
    max_characters: int = MAX_CHARACTERS
    min_characters: int = MIN_CHARACTERS
    fill: float = FILL
    fit_to_embedder: bool = True

    def __post_init__(self) -> None:
        if self.max_tokens <= SPECIAL_TOKENS:
            raise ValueError(f"max_tokens must be over {SPECIAL_TOKENS}, got {self.max_tokens}")
        if not 0 < self.min_characters <= self.max_characters:
            raise ValueError("need 0 < min_characters <= max_characters")
        if not 0 < self.fill <= 1:
            raise ValueError(f"fill must be in (0, 1], got {self.fill}")


@dataclass(frozen=True)
class CharSizes:
    """``chunk_by_title`` arguments, in characters."""

    max_characters: int
    new_after_n_chars: int
    combine_text_under_n_chars: int


def char_sizes(text: str, params: ChunkParams, count: CountTokens) -> CharSizes:
    """``chunk_by_title`` sizes for ``text`` (a run of elements joined): its
    characters per word piece × (``max_tokens`` − 2) × ``fill``, clamped to
    [``min_characters``, ``max_characters``]; 4/5 and 1/6 of that for the soft
    maximum and the combine threshold.  Without ``fit_to_embedder``: ``max_characters``
    and the same fractions of it, whatever the text."""
    if not params.fit_to_embedder:
        size = params.max_characters
        return CharSizes(size, size * 4 // 5, size // 6)
    pieces = max(1, count(text) - SPECIAL_TOKENS)
    per_piece = len(text) / pieces
    size = int((params.max_tokens - SPECIAL_TOKENS) * per_piece * params.fill)
    size = min(params.max_characters, max(params.min_characters, size))
    return CharSizes(size, size * 4 // 5, size // 6)


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


def _presplit(run: list, fits: Callable[[str], bool]) -> list:
    """``run`` with every element whose text does not ``fit`` replaced by copies of
    it (same type and metadata) holding its pieces, cut at sentences first
    (``chunk_by_title`` would cut an oversized element at any white space)."""
    out = []
    for el in run:
        text = el.text.strip()
        if fits(text):
            out.append(el)
            continue
        for piece in split_text(text, fits):
            part = copy.deepcopy(el)
            part.text = piece
            out.append(part)
    return out


def _page(elements: list, default: int = 0) -> int:
    pages = [e.metadata.page_number for e in elements if e.metadata.page_number]
    return min(pages) if pages else default


def _types(elements: list) -> list[str]:
    return list(dict.fromkeys(e.category for e in elements))


def _piece_elements(chunk, text: str, pieces: list[str]) -> list[list]:
    """For each piece of ``text`` (the chunk's stripped text), the chunk's original
    elements it overlaps; all of them when the chunk's text is not its elements'
    texts joined by blank lines (an element ``chunk_by_title`` itself split)."""
    origs = list(chunk.metadata.orig_elements or [chunk])
    spans, pos = [], 0
    for e in origs:
        spans.append((pos, pos + len(e.text or ""), e))
        pos += len(e.text or "") + 2  # chunk_by_title joins with "\n\n"
    joined = "\n\n".join(e.text or "" for e in origs)
    if joined.strip() != text:
        return [origs for _ in pieces]
    lead = len(joined) - len(joined.lstrip())
    out, cursor = [], 0
    for piece in pieces:
        start = text.find(piece, cursor)
        if start < 0:
            return [origs for _ in pieces]
        cursor = start + len(piece)
        a, b = start + lead, cursor + lead
        out.append([e for s, t, e in spans if s < b and t > a] or origs)
    return out


def chunk_elements(element_dicts: list[dict[str, Any]], params: Optional[ChunkParams] = None,
                   count_tokens: Optional[CountTokens] = None) -> list[dict[str, Any]]:
    """Chunk unstructured element dicts (as from ``element.to_dict()``).

    ``params``: sizes (default :class:`ChunkParams`: 256 word pieces);
    ``count_tokens``: word pieces of a text, special tokens included (default the
    embedder's tokenizer, ``stages.tokens.count_word_pieces``).

    Returns one dict per chunk, in document order: ``text`` (str, ≤
    ``max_characters``), ``page_number`` (int, first page of the chunk's elements; 0
    if the format has no pages), ``element_types`` (list[str], distinct categories of
    the elements it came from), ``table_html`` (str | None; a table piece's header
    and rows).  Every chunk's embed text (``stages.enhance.embed_text_for``) is at
    most ``max_tokens`` word pieces, unless ``params.fit_to_embedder`` is False (then
    only ``max_characters`` bounds a chunk).  Empty input → empty list.
    """
    from unstructured.chunking.title import chunk_by_title
    from unstructured.staging.base import elements_from_dicts

    params = params or ChunkParams()
    count = count_tokens or count_word_pieces

    def fits(s: str) -> bool:
        if not params.fit_to_embedder:
            return len(s) <= params.max_characters
        return len(s) <= params.max_characters and count(s) <= params.max_tokens

    elements = [e for e in elements_from_dicts(element_dicts) if (e.text or "").strip()]
    out: list[dict[str, Any]] = []
    for is_table, run in _runs(elements):
        if is_table:
            table = run[0]
            for p in split_table(table.metadata.text_as_html, table.text.strip(), fits):
                out.append({"text": p.text, "page_number": _page(run),
                            "element_types": ["Table"], "table_html": p.html})
            continue
        sizes = char_sizes("\n\n".join(e.text for e in run), params, count)
        if params.fit_to_embedder:  # else chunk_by_title cuts what is over max_characters itself
            target = int(params.max_tokens * params.fill)
            run = _presplit(run, lambda s: len(s) <= sizes.new_after_n_chars and count(s) <= target)
        for ch in chunk_by_title(run, max_characters=sizes.max_characters,
                                 new_after_n_chars=sizes.new_after_n_chars,
                                 combine_text_under_n_chars=sizes.combine_text_under_n_chars,
                                 include_orig_elements=True):
            text = ch.text.strip()
            pieces = split_text(text, fits)
            for piece, origs in zip(pieces, _piece_elements(ch, text, pieces)):
                out.append({"text": piece,
                            "page_number": _page(origs, int(ch.metadata.page_number or 0)),
                            "element_types": _types(origs), "table_html": None})
    return out


def over_limit(chunks: list[dict[str, Any]], max_tokens: int = EMBEDDER_MAX_TOKENS,
               count_tokens: Optional[CountTokens] = None) -> list[tuple[int, int]]:
    """``(index, word pieces)`` of every chunk whose embed text is over ``max_tokens``
    (a check for tests and benchmarks; empty when all fit)."""
    count = count_tokens or count_word_pieces
    sizes = [count(embed_text_for(c["text"], c["element_types"], c["table_html"])) for c in chunks]
    return [(i, n) for i, n in enumerate(sizes) if n > max_tokens]
