"""Scanned tables (stages.table_ocr), table accuracy (stages.table_eval, ``ragstream eval
tables``) and mixed PDFs (per-page strategy in the element metadata)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pypdf
import pytest

from stages.partition import partition_file, tesseract_available
from stages.profiles import DEFAULT_PROFILES
from stages.samples import TABLE, generate_samples
from stages.table_eval import best_table, html_to_grid, read_truth_csv, score_grid
from stages.table_ocr import find_tables
from tests.conftest import CORPUS

CORPUS_PDF = CORPUS / "pdf" / "table-multi-row-column-cells.pdf"
CORPUS_CSV = CORPUS_PDF.with_name("table-multi-row-column-cells-actual.csv")
NEEDS_TESSERACT = pytest.mark.skipif(not tesseract_available(), reason="tesseract not installed")
PROFILE = DEFAULT_PROFILES["default"]


@pytest.fixture(scope="module")
def sample_pdf(tmp_path_factory) -> Path:
    return generate_samples(tmp_path_factory.mktemp("samples"))[0]


def _table_page(pdf: Path) -> int:
    """The page of the sample PDF that holds the ruled table (from its text layer)."""
    elements = partition_file(pdf, "pdf", PROFILE)
    (table,) = [e for e in elements if e["type"] == "Table"]
    return table["metadata"]["page_number"]


def _image_only(pdf: Path, number: int, out: Path, dpi: int = 150) -> Path:
    """Page ``number`` of ``pdf`` rendered at ``dpi`` and saved as a one-page image-only PDF."""
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(pdf))
    try:
        image = doc[number - 1].render(scale=dpi / 72).to_pil().convert("RGB")
    finally:
        doc.close()
    image.save(out, format="PDF", resolution=dpi)
    return out


# --- evaluation maths -------------------------------------------------------------

def test_html_spans_expand_to_top_left():
    html = ('<table><tr><td rowspan="2">A</td><td colspan="2">B</td></tr>'
            '<tr><td>c</td><td> d  e </td></tr><tr><td>f</td><td>g</td><td>h</td></tr></table>')
    assert html_to_grid(html) == [["A", "B", ""], ["", "c", "d e"], ["f", "g", "h"]]


def test_score_counts_truth_positions(tmp_path):
    truth_csv = tmp_path / "t.csv"
    truth_csv.write_text('h1,h2,\n,x,"y  z"\n')
    truth = read_truth_csv(truth_csv)
    assert truth == [["h1", "h2", ""], ["", "x", "y z"]]
    score = score_grid([["h1", "h2", ""], ["", "x", "y"], ["extra", "", ""]], truth)
    assert (score.correct, score.total) == (5, 6) and score.diffs == [(1, 2, "y z", "y")]
    assert best_table([], truth)[0] is None and best_table([], truth)[1].accuracy == 0.0


# --- grid structure (no OCR) --------------------------------------------------------

def test_grid_with_spanning_cells_from_drawn_rules():
    """A ruled 4×3 grid drawn with Pillow: header cell spanning 2 columns, first-column
    cell spanning 2 rows; text stems must not become rules."""
    from PIL import Image, ImageDraw

    img = Image.new("L", (900, 500), 255)
    d = ImageDraw.Draw(img)
    xs, ys = [50, 350, 600, 850], [50, 150, 250, 350, 450]
    d.rectangle((xs[0], ys[0], xs[-1], ys[-1]), outline=0, width=3)
    for y in ys[1:-1]:  # row rules; the one under row 1 skips column 0 (rowspan)
        d.line((xs[1] if y == ys[2] else xs[0], y, xs[-1], y), fill=0, width=3)
    d.line((xs[1], ys[0], xs[1], ys[-1]), fill=0, width=3)
    d.line((xs[2], ys[1], xs[2], ys[-1]), fill=0, width=3)  # header: columns 1-2 merged
    for x, y in [(70, 80), (370, 80), (70, 180), (370, 180), (620, 180), (370, 280), (70, 380)]:
        d.rectangle((x, y, x + 4, y + 40), fill=0)  # glyph-like stems, 40 px tall
    (table,) = find_tables(np.asarray(img), dpi=200)
    assert (table.n_rows, table.n_cols) == (4, 3)
    spans = {(c.row, c.col): (c.rowspan, c.colspan) for c in table.cells}
    assert spans[(0, 1)] == (1, 2) and spans[(1, 0)] == (2, 1)
    assert len(table.cells) == 12 - 1 - 1


# --- scanned tables end to end --------------------------------------------------------

@NEEDS_TESSERACT
def test_scanned_sample_table_becomes_a_table(sample_pdf, tmp_path):
    page = _table_page(sample_pdf)
    scan = _image_only(sample_pdf, page, tmp_path / "scan.pdf")
    elements = partition_file(scan, "pdf", PROFILE)
    assert {e["metadata"]["partition_strategy"] for e in elements} == {"ocr_only"}
    tables = [e for e in elements if e["type"] == "Table"]
    index, score = best_table(elements, TABLE)
    assert index is not None and score.accuracy >= 0.9, score.diffs
    html = tables[index]["metadata"]["text_as_html"]
    assert "<td>North Basin</td><td>120</td><td>99.2</td><td>410</td>" in html
    # the OCR'd cell lines are replaced by the table, not repeated
    assert not any(e["text"].strip() == "West Hollow" for e in elements if e["type"] != "Table")


@NEEDS_TESSERACT
@pytest.mark.skipif(not CORPUS_PDF.is_file(), reason="shared corpus not present")
def test_corpus_multi_row_column_table_cell_accuracy():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "cli.main", "eval", "tables", str(CORPUS_PDF),
                             str(CORPUS_CSV)], capture_output=True, text=True, timeout=300,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("cell_accuracy=")
    print("\n" + result.stdout)
    assert float(last.split("=", 1)[1]) >= 0.9


@NEEDS_TESSERACT
def test_mixed_pdf_records_per_page_strategy(sample_pdf, tmp_path):
    """Born-digital pages stay ``fast``; only the scanned page is OCR'd (metadata)."""
    page = _table_page(sample_pdf)
    scan = _image_only(sample_pdf, page, tmp_path / "scan.pdf")
    reader = pypdf.PdfReader(sample_pdf)
    writer = pypdf.PdfWriter()
    for n in range(1, len(reader.pages) + 1):
        if n == page:
            writer.append(str(scan))
        else:
            writer.add_page(reader.pages[n - 1])
    mixed = tmp_path / "mixed.pdf"
    writer.write(mixed)
    elements = partition_file(mixed, "pdf", PROFILE)
    strategies: dict[int, set] = {}
    for e in elements:
        strategies.setdefault(e["metadata"]["page_number"], set()).add(e["metadata"]["partition_strategy"])
    assert strategies.pop(page) == {"ocr_only"}
    assert strategies and all(s == {"fast"} for s in strategies.values()), strategies
    assert len(strategies) == len(reader.pages) - 1
    tables = [e for e in elements if e["type"] == "Table"]
    assert [t["metadata"]["page_number"] for t in tables] == [page]
    assert best_table(tables, TABLE)[1].accuracy >= 0.9


@NEEDS_TESSERACT
def test_scanned_table_in_a_jpeg(sample_pdf, tmp_path):
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(sample_pdf))
    try:
        image = doc[_table_page(sample_pdf) - 1].render(scale=200 / 72).to_pil().convert("RGB")
    finally:
        doc.close()
    src = tmp_path / "page.jpg"
    image.save(src, format="JPEG", quality=85, dpi=(200, 200))
    elements = partition_file(src, "jpeg", PROFILE)
    assert {e["metadata"]["partition_strategy"] for e in elements} == {"ocr_only"}
    assert best_table(elements, TABLE)[1].accuracy >= 0.9
