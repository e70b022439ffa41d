"""chunk_by_title chunking and table rendering, without Kafka."""
import pytest
from unstructured.documents.elements import ElementMetadata, NarrativeText, Table, Title
from unstructured.staging.base import elements_to_dicts

from stages.chunk import MAX_CHARACTERS, chunk_elements, over_limit
from stages.enhance import embed_text_for, render_table

TABLE_HTML = ("<table><tr><th>Plant</th><th>Uptime</th></tr><tr><td>North</td><td>99.2</td></tr>"
              "<tr><td>East</td><td>98.7</td></tr></table>")


def _doc():
    return elements_to_dicts([
        Title("Summary", metadata=ElementMetadata(page_number=1)),
        NarrativeText("Water was treated. " * 40, metadata=ElementMetadata(page_number=1)),
        Table("Plant Uptime North 99.2 East 98.7",
              metadata=ElementMetadata(page_number=2, text_as_html=TABLE_HTML)),
        Title("Energy", metadata=ElementMetadata(page_number=3)),
        NarrativeText("Pumps used energy. " * 400, metadata=ElementMetadata(page_number=3)),
    ])


def test_chunks_keep_pages_types_and_tables_apart():
    chunks = chunk_elements(_doc())
    assert [c["page_number"] for c in chunks][:2] == [1, 2]
    assert chunks[0]["element_types"] == ["Title", "NarrativeText"]
    table = chunks[1]
    assert table["element_types"] == ["Table"] and table["table_html"] == TABLE_HTML
    assert all(len(c["text"]) <= MAX_CHARACTERS for c in chunks)
    assert not over_limit(chunks)  # every embed text within the embedder's 256 word pieces
    assert all(c["page_number"] == 3 for c in chunks[2:])
    assert sum("Pumps used energy." in c["text"] for c in chunks) >= 2  # long section split


def test_chunking_is_deterministic():
    assert chunk_elements(_doc()) == chunk_elements(_doc())


def test_characters_chunking_makes_the_peers_3000_character_chunks():
    """A profile's ``chunking="characters"``: by title at 3,000 / 2,400 / 500
    characters, word pieces not counted, so chunks run past the embedder's 256 (it reads
    their start); the same document in ``fit`` chunking gets more, smaller chunks that
    all fit.  Tables stay their own chunk either way."""
    from stages.chunk import ChunkParams
    from stages.profiles import DEFAULT_PROFILES, Profile

    fit = chunk_elements(_doc())
    chars = chunk_elements(_doc(), ChunkParams(fit_to_embedder=False))
    assert all(len(c["text"]) <= MAX_CHARACTERS for c in chars)
    assert len(chars) < len(fit)
    assert over_limit(chars) and not over_limit(fit)
    assert max(len(c["text"]) for c in chars) > 2400  # chunks fill to the 3,000-character cap
    assert chars[1]["element_types"] == ["Table"] and chars[1]["table_html"] == TABLE_HTML
    text = " ".join(c["text"] for c in chars)  # cut at white space, maybe mid-sentence
    assert text.count("Pumps") == text.count("energy.") == 400  # nothing dropped
    assert DEFAULT_PROFILES["basic"].chunking == "characters" and Profile().chunking == "fit"
    with pytest.raises(ValueError, match="unknown chunking"):
        Profile(chunking="tokens")


def test_table_rendering_names_columns_per_row():
    text = render_table(TABLE_HTML)
    assert text.splitlines() == ["Table. Columns: Plant | Uptime", "Plant: North; Uptime: 99.2",
                                 "Plant: East; Uptime: 98.7"]
    assert embed_text_for("raw", ["Table"], TABLE_HTML) == text
    assert embed_text_for("just text", ["NarrativeText"], None) == "just text"
    assert render_table("<p>no rows</p>", fallback_text="fallback") == "fallback"


def test_document_header_is_the_name_in_words_and_its_kind():
    from stages.enhance import document_header

    assert document_header("pdf/fake-memo.pdf") == "fake memo (PDF document)"
    assert document_header("Annual_Report.2023.XLSX") == "Annual Report 2023 (spreadsheet)"
    assert document_header("notes") == "notes"
    assert document_header("") == ""


def test_header_goes_first_and_never_pushes_past_the_limit():
    from stages.enhance import with_header
    from stages.tokens import count_word_pieces as count

    header = "layout parser paper with table (PDF document)"
    assert with_header(header, "short text", 256, count) == f"{header}\n\nshort text"
    for words in (240, 248, 250, 252, 254, 300):  # bodies near and over the limit
        body = "water " * words
        embed = with_header(header, body, 256, count)
        assert embed.endswith(body)  # the text itself is never cut
        assert count(embed) <= max(256, count(body))
        assert embed == body or embed.startswith("layout")
    assert with_header(header, "water " * 300, 256, count) == "water " * 300
    assert with_header("", "text", 256, count) == "text"


def _enhance_ctx():
    """A stand-in StageContext for the enhance agent (no VLM, no Kafka): ``(ctx, sent)``,
    ``sent`` the records its ``enhanced`` topic received, in order."""
    from types import SimpleNamespace

    sent = []

    class Topic:
        async def send(self, key, value, partition=None):
            sent.append(value)
            partitions.append(partition)

    async def emit(*a, **kw):
        return None

    async def partition_count(topic):
        return 4

    partitions: list = []
    ctx = SimpleNamespace(settings=SimpleNamespace(vlm_base_url="", embedder_max_tokens=256,
                                                   fair_small_document_chunks=64),
                          topics=SimpleNamespace(enhanced=Topic()), emit=emit,
                          partition_count=partition_count, partitions=partitions)
    return ctx, sent


def test_enhance_stage_puts_the_header_in_embed_text_only():
    """The enhance agent's own composition (no Kafka): header + rendering in
    ``embed_text``, ``text`` untouched."""
    import asyncio

    from agents import enhance as agent
    from schemas import Chunk

    ctx, sent = _enhance_ctx()
    chunk = Chunk(chunk_id="d:1:1", document_id="d", version=1, index=1, total=2, project="p",
                  category="default", filename="pdf/fake-memo.pdf", text="Table text",
                  page_number=1, element_types=["Table"], table_html=TABLE_HTML)
    asyncio.run(agent.enhance_one(ctx, chunk))
    assert sent[0].embed_text == "fake memo (PDF document)\n\n" + render_table(TABLE_HTML)
    assert sent[0].text == "Table text"


def test_enhance_batch_sends_every_chunk_in_order():
    """The batched enhance stage: each chunk of the batch enhanced and sent, in order."""
    import asyncio

    from agents import enhance as agent
    from schemas import Chunk

    ctx, sent = _enhance_ctx()
    chunks = [Chunk(chunk_id=f"d:1:{i}", document_id="d", version=1, index=i, total=3, project="p",
                    category="default", filename="notes.txt", text=f"text {i}", page_number=1,
                    element_types=["NarrativeText"]) for i in range(3)]
    asyncio.run(agent.enhance_batch(ctx, chunks))
    assert [c.chunk_id for c in sent] == ["d:1:0", "d:1:1", "d:1:2"]
    # a 3-chunk document: every chunk on one partition of the small lane (topics/lanes.py)
    assert len(set(ctx.partitions)) == 1 and ctx.partitions[0] in (0, 1)
    assert all(c.embed_text.endswith(f"text {i}") for i, c in enumerate(sent))
