"""The generated sample documents: content and byte-for-byte determinism."""
from __future__ import annotations

import zipfile

import pypdf

from stages.samples import TABLE, generate_samples


def test_samples_are_deterministic(tmp_path):
    first = generate_samples(tmp_path / "a")
    second = generate_samples(tmp_path / "b")
    assert [p.name for p in first] == ["sample-report.pdf", "sample-report.docx", "sample-report.html"]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), f"{a.name} differs between runs"


def test_sample_pdf_has_pages_table_text_and_image(tmp_path):
    pdf_path = generate_samples(tmp_path)[0]
    reader = pypdf.PdfReader(pdf_path)
    assert len(reader.pages) >= 3
    text = "\n".join(page.extract_text() for page in reader.pages)
    assert "Executive summary" in text and "North Basin" in text
    assert sum(len(page.images) for page in reader.pages) == 1


def test_sample_docx_and_html_have_the_table(tmp_path):
    _, docx_path, html_path = generate_samples(tmp_path)
    with zipfile.ZipFile(docx_path) as zf:
        body = zf.read("word/document.xml").decode()
    assert "<w:tbl>" in body and "West Hollow" in body
    html = html_path.read_text()
    assert "<table>" in html and html.count("<tr>") == len(TABLE)
