"""Type detection by content: the name is only a tie-breaker among text types."""
from __future__ import annotations

import shutil

import pytest

from stages.detect import detect_type
from stages.samples import chart_png, generate_samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    pdf, docx, html = generate_samples(tmp_path_factory.mktemp("samples"))
    return {"pdf": pdf, "docx": docx, "html": html}


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def test_png_named_pdf_is_png(tmp_path):
    det = detect_type(_write(tmp_path, "scan.pdf", chart_png()))
    assert (det.filetype, det.mime, det.extension) == ("png", "image/png", "pdf")
    assert det.name_mismatch


def test_pdf_named_txt_is_pdf(tmp_path, samples):
    det = detect_type(shutil.copy(samples["pdf"], tmp_path / "notes.txt"))
    assert det.filetype == "pdf" and det.mime == "application/pdf" and det.name_mismatch


@pytest.mark.parametrize("name", ["report.bin", "report.zip", "report.pdf", "report"])
def test_docx_by_content_whatever_the_name(tmp_path, samples, name):
    assert detect_type(shutil.copy(samples["docx"], tmp_path / name)).filetype == "docx"


def test_truncated_docx_is_still_docx(tmp_path, samples):
    data = samples["docx"].read_bytes()
    assert detect_type(_write(tmp_path, "cut.docx", data[: len(data) // 3])).filetype == "docx"


def test_html_without_extension(tmp_path, samples):
    assert detect_type(shutil.copy(samples["html"], tmp_path / "page")).filetype == "html"


def test_zero_bytes_is_empty(tmp_path):
    assert detect_type(_write(tmp_path, "empty.pdf", b"")).filetype == "empty"


MARKDOWN = "# Title\n\nSome *text* with a [link](http://example.com).\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
PROSE = "This is a plain letter.\nIt has two lines of prose, and nothing else.\n"
CSV = "name,qty,price\napple,3,1.20\npear,5,0.80\nplum,7,0.30\n"


@pytest.mark.parametrize("name,data,expected", [
    ("readme", MARKDOWN, "md"),
    ("readme.md", MARKDOWN, "md"),
    ("notes.md", PROSE, "md"),          # extension breaks the tie for plain prose
    ("notes.txt", PROSE, "txt"),
    ("notes.html", PROSE, "txt"),       # no markup: the name does not make it HTML
    ("data", CSV, "csv"),
    ("data.csv", CSV, "csv"),
    ("data.tsv", CSV.replace(",", "\t"), "tsv"),
    ("page.txt", "<!DOCTYPE html><html><body><p>Hi</p></body></html>", "html"),
    ("feed.xml", '<?xml version="1.0"?><feed><entry>x</entry></feed>', "xml"),
])
def test_text_types(tmp_path, name, data, expected):
    assert detect_type(_write(tmp_path, name, data)).filetype == expected


def test_legacy_office_by_ole_stream_names(tmp_path):
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    doc = ole + "WordDocument".encode("utf-16-le") + b"\x00" * 512
    assert detect_type(_write(tmp_path, "old.bin", doc)).filetype == "doc"
    xls = ole + "Workbook".encode("utf-16-le") + b"\x00" * 512
    assert detect_type(_write(tmp_path, "old.doc", xls)).filetype == "xls"
    encrypted = ole + "EncryptedPackage".encode("utf-16-le") + b"\x00" * 512
    det = detect_type(_write(tmp_path, "secret.xlsx", encrypted))
    assert det.filetype == "xlsx" and det.encrypted


def test_jpeg_and_unknown_binary(tmp_path):
    from PIL import Image

    path = tmp_path / "photo.png"
    Image.new("RGB", (8, 8), "red").save(path, format="JPEG")
    assert detect_type(path).filetype == "jpeg"
    assert detect_type(_write(tmp_path, "blob.pdf", bytes(range(256)) * 8)).filetype == "unknown"
