"""Tables drawn with horizontal rules only (stages.rule_tables): born-digital and scanned."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from stages import rule_tables
from stages.partition import partition_file, tesseract_available
from stages.profiles import DEFAULT_PROFILES
from tests.conftest import CORPUS  # beside the checkout, or RAGSTREAM_CORPUS
PROFILE = DEFAULT_PROFILES["default"]


def _rows(html: str) -> list[list[str]]:
    return [re.findall(r"<td[^>]*>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", html)]


def _tables(elements: list[dict]) -> list[dict]:
    return [e for e in elements if e["type"] == "Table" and e["metadata"].get("text_as_html")]


HEADER = ["Sample", "Mass (g)", "Yield (%)", "Status"]
BODY = [["Alpha", "12.5", "81.2", "passed"],
        ["Beta", "7.25", "64.0", "failed"],
        ["Gamma", "30.0", "92.7", "passed"],
        ["Delta", "4.75", "55.1", "retest"]]


def _booktabs_pdf(path: Path) -> Path:
    """A born-digital page with a horizontal-rules-only table (top, header, bottom rules)
    between two paragraphs."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    width, height = A4
    c.setFont("Helvetica", 11)
    c.drawString(72, height - 90, "Quarterly results of the laboratory, before the table.")
    c.drawString(72, height - 120, "Table 2: Mass and yield of the samples")
    xs = [80, 190, 300, 420]
    top = height - 135
    c.setLineWidth(0.8)
    c.line(72, top, 520, top)
    c.setFont("Helvetica-Bold", 10)
    for x, text in zip(xs, HEADER):
        c.drawString(x, top - 15, text)
    c.line(72, top - 22, 520, top - 22)
    c.setFont("Helvetica", 10)
    y = top - 38
    for row in BODY:
        for x, text in zip(xs, row):
            c.drawString(x, y, text)
        y -= 16
    c.line(72, y + 8, 520, y + 8)
    c.setFont("Helvetica", 11)
    c.drawString(72, y - 20, "The samples marked retest are measured again next quarter.")
    c.showPage()
    c.save()
    return path


def test_generated_rule_only_table_cells_exact(tmp_path):
    elements = partition_file(_booktabs_pdf(tmp_path / "booktabs.pdf"), "pdf", PROFILE)
    tables = _tables(elements)
    assert len(tables) == 1
    assert _rows(tables[0]["metadata"]["text_as_html"]) == [HEADER] + BODY
    assert tables[0]["metadata"]["page_number"] == 1
    assert tables[0]["metadata"]["coordinates"]["points"]
    text = " ".join(e["text"] for e in elements if e["type"] != "Table")
    assert "before the table" in text and "measured again" in text and "Table 2" in text
    assert "Gamma" not in text  # the loose cell text was replaced by the Table


def test_build_rows_merges_header_lines_and_continuation_rows():
    W = rule_tables.Word
    words = [W(0, 0, 30, 10, "Name"), W(100, 0, 130, 10, "Long"),
             W(100, 12, 140, 22, "header"),                       # 2nd header line
             W(0, 40, 30, 50, "a"), W(100, 40, 130, 50, "one"),
             W(100, 52, 130, 62, "more"),                         # continuation: empty first cell
             W(0, 70, 30, 80, "b"), W(100, 70, 130, 80, "two")]
    rows = rule_tables.build_rows(words, (0, -5, 150, 85), rule_ys=[-5, 30, 85])
    assert rows == [["Name", "Long header"], ["a", "one more"], ["b", "two"]]


def test_plain_text_page_is_not_tabular():
    assert not rule_tables.looks_tabular(rule_tables.long_rules([(72, 100, 200)], 595, 2), 595)
    rules = rule_tables.long_rules([(72, 100, 520), (72, 100.5, 520), (72, 300, 520)], 595, 2)
    assert len(rules) == 2 and rule_tables.looks_tabular(rules, 595)


needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not present")


@needs_corpus
def test_corpus_booktabs_pdf_table():
    tables = _tables(partition_file(CORPUS / "pdf/layout-parser-paper-with-table.pdf", "pdf", PROFILE))
    assert len(tables) == 1
    rows = _rows(tables[0]["metadata"]["text_as_html"])
    assert rows[0] == ["Dataset", "Base Model1", "Large Model", "Notes"]
    assert rows[1] == ["PubLayNet [38]", "F / M", "M", "Layouts of modern scientific documents"]
    assert rows[5] == ["HJDataset [31]", "F / M", "-", "Layouts of history Japanese documents"]
    assert len(rows) == 6


@needs_corpus
def test_corpus_two_line_header_pdf_table():
    tables = _tables(partition_file(CORPUS / "pdf/embedded-images-tables.pdf", "pdf", PROFILE))
    assert len(tables) == 1
    rows = _rows(tables[0]["metadata"]["text_as_html"])
    assert rows[0] == ["Inhibitor concentration (g)", "bc (V/dec)", "ba (V/dec)", "Ecorr (V)",
                       "icorr (A/cm2)", "Polarization resistance (Ω)", "Corrosion rate (mm/year)"]
    assert [r[0] for r in rows[1:]] == ["0", "2", "4", "6", "8", "10"]
    assert rows[1][1:3] == ["0.0335", "0.0409"] and rows[1][4:] == ["0.0003", "24.0910", "2.8163"]
    assert rows[6][4:] == ["1.24E-05", "246.080", "0.0919"]


@needs_corpus
@pytest.mark.skipif(not tesseract_available(), reason="scan: tesseract")
def test_corpus_scanned_table():
    elements = partition_file(CORPUS / "img/embedded-images-tables.jpg", "jpeg", PROFILE)
    tables = _tables(elements)
    assert len(tables) == 1
    rows = _rows(tables[0]["metadata"]["text_as_html"])
    assert len(rows) == 7 and all(len(r) == 7 for r in rows)
    assert rows[0][:4] == ["Inhibitor concentration (g)", "bc (V/dec)", "ba (V/dec)", "Ecorr (V)"]
    assert rows[1] == ["0", "0.0335", "0.0409", "-0.9393", "0.0003", "24.0910", "2.8163"]
    assert rows[4] == ["6", "0.3233", "0.0540", "-0.8027", "5.39E-05", "373.180", "0.4318"]
    text = " ".join(e["text"] for e in elements if e["type"] != "Table")
    assert "Potentiodynamic polarization data" in text  # the caption OCR'd with the table is kept


def test_regions_without_layout_model_need_three_rules():
    rules = [(72, 100, 520), (72, 120, 520), (72, 200, 520)]
    assert rule_tables.regions(rules, 595, None, 2) == [((72, 100, 520, 200), [100, 120, 200], False)]
    assert rule_tables.regions(rules[:2], 595, None, 2) == []


def test_chart_gridlines_are_not_a_table():
    W = rule_tables.Word
    words = [W(0, 0, 30, 10, "Title"), W(100, 0, 130, 10, "of"), W(200, 0, 230, 10, "chart"),
             W(0, 95, 30, 105, "North"), W(100, 95, 130, 105, "East"), W(200, 95, 230, 105, "West")]
    assert rule_tables.build_rows(words, (0, -5, 250, 110), rule_ys=[-5, 20, 40, 60, 80, 110]) is None
