"""Every character of every chunk reaches the index: chunks fit the embedder's limit.

all-MiniLM-L6-v2 reads 256 word pieces of a text and drops the rest.  These tests
chunk with the stage functions (no Kafka), count with the embedder's own tokenizer,
and embed with the real in-process ONNX embedder where it matters.
"""
from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from unstructured.documents.elements import ElementMetadata, NarrativeText, Table, Title
from unstructured.staging.base import elements_to_dicts

from stages.chunk import ChunkParams, char_sizes, chunk_elements, over_limit
from stages.enhance import embed_text_for, render_table, table_rows
from stages.split import split_text
from stages.tokens import EMBEDDER_MAX_TOKENS, count_word_pieces
from tests.conftest import CORPUS

LIMIT = EMBEDDER_MAX_TOKENS

WATER = [
    "Raw water is drawn from the river intake and screened for debris.",
    "Coagulants are dosed in the rapid mix chamber before flocculation.",
    "Settled water passes through dual media filters of sand and anthracite.",
    "Filter beds are backwashed when head loss reaches the set point.",
    "Chlorine contact time is verified against the disinfection tables.",
    "Turbidity of the combined filter effluent is logged every fifteen minutes.",
    "Sludge from the clarifiers is thickened and sent to drying beds.",
    "Laboratory staff sample the distribution system at fixed points weekly.",
]
ENERGY = [
    "Pump motors draw most of the electricity used by the utility.",
    "Variable speed drives reduce energy use at low demand.",
    "Solar panels on the depot roof offset part of the daytime load.",
    "Aeration blowers are the second largest electrical load.",
    "Energy audits are carried out every year by an outside firm.",
    "Peak tariffs apply between five and eight in the evening.",
]
FINAL = "The backup generator at the Riverside plant is load-tested every second Tuesday by the night shift."
QUERY = "How often is the backup generator at Riverside load-tested?"


def _section(sentences: list[str], chars: int) -> str:
    """One paragraph of the sentences, cycled, just under ``chars`` characters."""
    text, i = "", 0
    while len(text) + len(sentences[i % len(sentences)]) < chars:
        text += sentences[i % len(sentences)] + " "
        i += 1
    return text.strip()


def _report() -> list[dict]:
    """Two sections of ~3,000 characters, each one chunk at the former fixed sizes
    (3000 / 2400 / 500); the first ends with :data:`FINAL`."""
    water = _section(WATER, 2960 - len(FINAL)) + " " + FINAL
    return elements_to_dicts([
        Title("Water treatment", metadata=ElementMetadata(page_number=1)),
        NarrativeText(water, metadata=ElementMetadata(page_number=1)),
        Title("Energy", metadata=ElementMetadata(page_number=2)),
        NarrativeText(_section(ENERGY, 2960), metadata=ElementMetadata(page_number=2)),
    ])


@pytest.fixture(scope="module")
def embedder():
    from adapters.embedder import DEFAULT_ONNX_PATH, OnnxEmbedder

    emb = OnnxEmbedder(DEFAULT_ONNX_PATH, intra_op_threads=1)
    yield emb
    asyncio.run(emb.close())


def test_sentence_at_the_end_of_a_long_section_is_found(embedder):
    doc = _report()
    water = "\n\n".join(e["text"] for e in doc if e["metadata"]["page_number"] == 1)
    assert 2900 <= len(water) <= 3000  # one chunk at the former sizes...
    assert count_word_pieces(water) > 2 * LIMIT  # ...whose final sentence the embedder never read
    chunks = chunk_elements(doc)
    texts = [embed_text_for(c["text"], c["element_types"], c["table_html"]) for c in chunks]
    vectors = embedder.embed_sync(texts)
    query = embedder.embed_sync([QUERY])[0]
    best = int(np.argmax(vectors @ query))
    assert FINAL in chunks[best]["text"], (best, [c["text"][:60] for c in chunks])
    assert chunks[best]["page_number"] == 1
    assert not over_limit(chunks)


def test_split_text_prefers_sentences_then_words_then_characters():
    def fits(s: str) -> bool:
        return count_word_pieces(s) <= 40

    text = " ".join(WATER)
    pieces = split_text(text, fits)
    assert len(pieces) > 1 and all(fits(p) for p in pieces)
    assert all(p.endswith(".") for p in pieces)  # every cut at a sentence end
    assert " ".join(pieces) == text

    one_sentence = "word " * 100 + "end."
    pieces = split_text(one_sentence, fits)
    assert all(fits(p) for p in pieces) and " ".join(pieces) == one_sentence.strip()

    blob = "ab/" * 400  # one "word" of 1,200 characters, 800 word pieces
    pieces = split_text("start " + blob + " stop", fits)
    assert all(fits(p) for p in pieces) and len(pieces) > 10
    assert "".join(pieces).replace(" ", "") == ("start" + blob + "stop")


def test_an_enormous_word_is_cut_by_characters_to_the_character_cap():
    long_word = "x" * 10_000  # the tokenizer reads any word over 100 characters as one [UNK]
    chunks = chunk_elements(elements_to_dicts([NarrativeText(long_word)]))
    assert all(len(c["text"]) <= ChunkParams().max_characters for c in chunks)
    # chunk_by_title may join two cut pieces again, with its blank line between them
    assert re.sub(r"\s", "", "".join(c["text"] for c in chunks)) == long_word


def _table(rows: int) -> str:
    body = "".join(f"<tr><td>Plant {i}</td><td>Region {i % 7}</td><td>{90 + i % 10}.{i % 9}</td>"
                   f"<td>Pump {i} inspected, seals replaced</td></tr>" for i in range(rows))
    return f"<table><thead><tr><th>Plant</th><th>Region</th><th>Uptime</th><th>Notes</th></tr></thead><tbody>{body}</tbody></table>"


def test_a_60_row_table_splits_by_rows_with_the_header_in_every_piece(embedder):
    html = _table(60)
    header, *body = table_rows(html)
    doc = elements_to_dicts([Title("Plants"), Table("plants table text", metadata=ElementMetadata(
        page_number=4, text_as_html=html))])
    pieces = [c for c in chunk_elements(doc) if c["element_types"] == ["Table"]]
    assert len(pieces) > 1
    seen = []
    for p in pieces:
        rows = table_rows(p["table_html"])
        assert rows[0] == header and len(rows) > 1
        seen += rows[1:]
        assert p["page_number"] == 4 and p["text"].startswith("Plant Region Uptime Notes")
        assert embed_text_for(p["text"], p["element_types"], p["table_html"]) == render_table(p["table_html"])
    assert seen == body  # every row once, in order
    assert not over_limit(pieces)
    renderings = [render_table(p["table_html"]) for p in pieces]
    vectors = embedder.embed_sync(renderings)
    sims = vectors @ vectors.T
    assert (sims[~np.eye(len(pieces), dtype=bool)] < 0.9999).all()  # no two pieces share a vector


def test_render_table_has_no_character_cut():
    html = _table(300)
    text = render_table(html)
    assert len(text) > 20_000 and text.splitlines()[-1].startswith("Plant: Plant 299;")


def test_a_small_table_stays_whole_and_a_huge_cell_becomes_labelled_text():
    small = _table(2)
    [only] = chunk_elements(elements_to_dicts([Table("t", metadata=ElementMetadata(text_as_html=small))]))
    assert only["table_html"] == small
    cell = " ".join(WATER) * 8  # ~4,700 characters in one cell
    html = f"<table><tr><th>Item</th><th>Procedure</th></tr><tr><td>Filters</td><td>{cell}</td></tr></table>"
    chunks = chunk_elements(elements_to_dicts([Table("t", metadata=ElementMetadata(text_as_html=html))]))
    assert len(chunks) > 2 and not over_limit(chunks)
    assert all(c["element_types"] == ["Table"] for c in chunks)
    assert any(c["table_html"] and "Filters" in c["text"] for c in chunks)  # the short column
    text_pieces = [c["text"] for c in chunks if c["table_html"] is None]
    assert text_pieces[0].startswith("Procedure: ")
    assert re.sub(r"\s", "", "".join(text_pieces)) == re.sub(r"\s", "", "Procedure: " + cell)


KOREAN = ("대한민국의 수도는 서울이며 한강이 도시를 가로질러 흐른다. 정수장은 강물을 끌어와 "
          "침전과 여과를 거쳐 깨끗한 물을 공급한다. 야간 근무조는 매주 펌프와 밸브를 점검한다. ")


def test_korean_text_respects_the_token_limit():
    text = KOREAN * 30  # ~2,900 characters, ~5,000 word pieces (syllables become jamo)
    assert count_word_pieces(text) > 10 * LIMIT
    doc = elements_to_dicts([Title("정수장 운영"), NarrativeText(text)])
    chunks = chunk_elements(doc)
    assert len(chunks) > 10 and not over_limit(chunks)
    joined = re.sub(r"\s", "", "".join(c["text"] for c in chunks))
    assert joined == re.sub(r"\s", "", "정수장 운영" + text)
    sizes = char_sizes(text, ChunkParams(), count_word_pieces)
    english = char_sizes(" ".join(WATER), ChunkParams(), count_word_pieces)
    assert sizes.max_characters < english.max_characters <= ChunkParams().max_characters


def test_a_lower_limit_from_settings_makes_smaller_chunks():
    doc = _report()
    small = chunk_elements(doc, ChunkParams(max_tokens=64))
    assert len(small) > len(chunk_elements(doc))
    assert not over_limit(small, max_tokens=64)


def _corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix.lower() != ".csv"
                  and not p.name.startswith("."))


@pytest.mark.slow
@pytest.mark.skipif(not _corpus_files(), reason=f"no corpus at {CORPUS}")
@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name)
def test_no_corpus_chunk_is_over_the_limit(path):
    from stages.normalize import normalize_file
    from stages.partition import partition_file
    from stages.profiles import get_profile

    profile = get_profile("default")
    with tempfile.TemporaryDirectory() as tmp:
        norm = normalize_file(path, Path(tmp), profile)
        elements = partition_file(norm.path, norm.filetype, profile, None, path.name)
    chunks = chunk_elements(elements)
    assert chunks and over_limit(chunks) == []
