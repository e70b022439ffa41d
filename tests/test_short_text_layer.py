"""stages/short_text_layer.py: a page whose text pdfminer reads only in part takes
pdfium's text (the real case, CID fonts pdfminer cannot map, is the Amazon 2022
sustainability report of bench/heldout: 78 of 82 pages; here the loss is simulated by
dropping elements of a generated PDF, the pdfium side is real)."""
from __future__ import annotations

from pathlib import Path

from unstructured.documents.elements import ElementMetadata, NarrativeText, Table

from stages.short_text_layer import paragraphs, replace_short_pages

SENTENCE = "The harbour authority dredged the northern channel to twelve metres in spring."


def _pdf(path: Path, pages: int = 2, lines: int = 20) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for n in range(1, pages + 1):
        for i in range(lines):
            c.drawString(60, 780 - 18 * i, f"Page {n} line {i}. {SENTENCE}")
        c.drawString(60, 1200, "drawn above the page box, not on the page")  # off-page
        c.showPage()
    c.save()
    return path


def _el(cls, text: str, page: int):
    return cls(text=text, metadata=ElementMetadata(filename="h.pdf", page_number=page))


def test_paragraphs_join_lines_until_a_sentence_ends():
    text = "Inbound Transportation\r\nTeams aim to opti-\r\nmize the speed and\r\ncost.\r\nNext one:\r\n\r\ntail"
    assert paragraphs(text) == ["Inbound Transportation Teams aim to optimize the speed and cost.",
                                "Next one:", "tail"]


def test_a_short_page_takes_pdfiums_text_and_keeps_its_table(tmp_path):
    pdf = _pdf(tmp_path / "h.pdf")
    full = [_el(NarrativeText, f"Page 1 line {i}. {SENTENCE}", 1) for i in range(20)]
    partial = [_el(NarrativeText, "Page 2 line 0.", 2), _el(Table, "a b c", 2)]
    elements, short = replace_short_pages(full + partial, pdf, 1, "h.pdf")
    assert short == [2]
    assert elements[:20] == full  # page 1 untouched
    page2 = elements[20:]
    assert any(el.category == "Table" for el in page2)
    text = " ".join(el.text for el in page2 if el.category == "NarrativeText")
    assert text.count(SENTENCE) == 20 and "above the page box" not in text
    assert {el.metadata.partition_strategy for el in page2 if el.category == "NarrativeText"} == {"pdfium"}
    assert all(el.metadata.page_number == 2 for el in page2)


def test_pages_read_fully_skipped_or_with_little_text_stay(tmp_path):
    pdf = _pdf(tmp_path / "h.pdf")
    full = [_el(NarrativeText, f"Page {n} line {i}. {SENTENCE}", n) for n in (1, 2) for i in range(20)]
    assert replace_short_pages(full, pdf, 1, "h.pdf") == (full, [])
    assert replace_short_pages(full[:20], pdf, 1, "h.pdf", skip={2})[1] == []  # e.g. going to OCR
    few = _pdf(tmp_path / "few.pdf", pages=1, lines=2)  # under 50 words missing: left alone
    assert replace_short_pages([], few, 1, "few.pdf")[1] == []


def test_a_page_range_is_numbered_from_its_first_page(tmp_path):
    pdf = _pdf(tmp_path / "h.pdf", pages=1)
    elements, short = replace_short_pages([], pdf, 7, "h.pdf")
    assert short == [7] and {el.metadata.page_number for el in elements} == {7}
