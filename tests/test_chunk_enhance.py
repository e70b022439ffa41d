"""chunk_by_title chunking and table rendering, without Kafka."""
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


def test_table_rendering_names_columns_per_row():
    text = render_table(TABLE_HTML)
    assert text.splitlines() == ["Table. Columns: Plant | Uptime", "Plant: North; Uptime: 99.2",
                                 "Plant: East; Uptime: 98.7"]
    assert embed_text_for("raw", ["Table"], TABLE_HTML) == text
    assert embed_text_for("just text", ["NarrativeText"], None) == "just text"
    assert render_table("<p>no rows</p>", fallback_text="fallback") == "fallback"
