"""bench/parse.py: pages/s per strategy over a folder, on the project's samples."""
from __future__ import annotations

import shutil

import pytest
from rich.console import Console

from bench.parse import bench_parse, run_strategy
from stages.partition import tesseract_available
from stages.samples import generate_samples


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-corpus")
    pdf, _docx, html = generate_samples(root / "gen")
    shutil.copy(pdf, root / "report.pdf")
    shutil.copy(html, root / "report.html")
    (root / "truth.csv").write_text("a,b\n")  # ground truth files are skipped
    shutil.rmtree(root / "gen")
    return root


def test_run_strategy_counts_pages_and_failures(corpus, tmp_path):
    import io

    from PIL import Image

    from stages.samples import chart_png

    scan = tmp_path / "scan.pdf"
    Image.open(io.BytesIO(chart_png())).save(scan, format="PDF")
    fast = run_strategy([corpus / "report.pdf", scan], "fast")
    assert (fast.documents, fast.failed) == (1, 1)
    assert fast.reasons == {"OCRUnavailable": 1} and fast.pages >= 3 and fast.seconds > 0
    assert "strategy 'fast'" in fast.per_file[1][3]


@pytest.mark.skipif(not tesseract_available(), reason="tesseract not installed")
def test_bench_parse_prints_a_row_per_strategy(corpus):
    console = Console(record=True, width=160)
    runs = bench_parse(corpus, console, ["fast", "auto", "ocr_only"])
    assert list(runs) == ["fast", "auto", "ocr_only"]
    pages = {s: r.pages for s, r in runs.items()}
    assert pages["fast"] == pages["auto"] == pages["ocr_only"] >= 4  # 3+ PDF pages + 1 HTML page
    assert runs["ocr_only"].ocr_pages >= 3 and runs["auto"].ocr_pages == 0
    assert all(r.pages_per_s > 0 and r.failed == 0 for r in runs.values())
    assert runs["fast"].tables >= 1
    text = console.export_text()
    assert text.strip().splitlines()[-1].startswith("parse_pages_per_s fast=")
    with pytest.raises(ValueError, match="unknown strategies"):
        bench_parse(corpus, console, ["turbo"])
