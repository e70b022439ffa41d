"""Siblings of the hostile cases (issue 10) in other shapes, built here: each fix must
cover its whole kind (embedded image bombs, unknown or alias charsets in mail and HTML,
deep nesting reached through Markdown, sheet extent code).  Partition path only."""
from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path

import pytest

from stages.errors import LimitExceeded

DATA = Path(__file__).parent / "data" / "hostile"
BOMB_PNG = DATA / "png-400-megapixel.png"
PIXELS = r"20,000×20,000 = 400,000,000 pixels, limit 89,478,485 \(RAGSTREAM_MAX_IMAGE_PIXELS\)"
pytestmark = pytest.mark.timeout(600)


def _partition(path: Path, filetype: str) -> list[dict]:
    from stages.partition import partition_file
    from stages.profiles import Profile

    return partition_file(path, filetype, Profile(name="default"))


def _text(elements: list[dict]) -> str:
    return "\n".join(e["text"] for e in elements)


def _swap_media(src: Path, dest: Path, folder: str, blob: bytes) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info in zin.infolist():
            out.writestr(info, blob if info.filename.startswith(folder) else zin.read(info))
    src.unlink()
    return dest


def _small_png() -> io.BytesIO:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 20), "red").save(buf, format="PNG")
    buf.seek(0)
    return buf


def picture_only_docx(path: Path, blob: bytes) -> Path:
    """A DOCX whose only content is one picture, its media part replaced by ``blob``."""
    import docx

    document = docx.Document()
    document.add_picture(_small_png())
    document.save(path.with_suffix(".tmp"))
    return _swap_media(path.with_suffix(".tmp"), path, "word/media/", blob)


def picture_only_pptx(path: Path, blob: bytes) -> Path:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_picture(_small_png(), Inches(1), Inches(1))
    prs.save(path.with_suffix(".tmp"))
    return _swap_media(path.with_suffix(".tmp"), path, "ppt/media/", blob)


def scanned_pdf_with_huge_image(path: Path, side: int = 20_000) -> Path:
    """One page, no text layer, one ``side``×``side`` 1-bit image XObject (~50 KB)."""
    import pikepdf

    pdf = pikepdf.new()
    image = pikepdf.Stream(pdf, zlib.compress(b"\xff" * ((side + 7) // 8) * side, 9))
    image.Type, image.Subtype = pikepdf.Name.XObject, pikepdf.Name.Image
    image.Width = image.Height = side
    image.BitsPerComponent, image.ColorSpace = 1, pikepdf.Name.DeviceGray
    image.Filter = pikepdf.Name.FlateDecode
    page = pikepdf.Dictionary(Type=pikepdf.Name.Page, MediaBox=[0, 0, 612, 792],
                              Resources=pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=image)),
                              Contents=pikepdf.Stream(pdf, b"q 400 0 0 400 100 300 cm /Im0 Do Q"))
    pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)
    return path


def _eml(charset: str, body: bytes, subtype: str = "plain") -> bytes:
    return (f"From: a@example.com\nTo: b@example.com\nSubject: charset {charset}\nMIME-Version: 1.0\n"
            f"Content-Type: text/{subtype}; charset=\"{charset}\"\nContent-Transfer-Encoding: 8bit\n\n"
            ).encode() + body + b"\n"


# -- images embedded in documents ---------------------------------------------------------

@pytest.mark.parametrize("build,filetype", [(picture_only_docx, "docx"), (picture_only_pptx, "pptx")])
def test_office_picture_bomb_fails_before_ocr_decode(tmp_path, build, filetype):
    path = build(tmp_path / f"bomb.{filetype}", BOMB_PNG.read_bytes())
    with pytest.raises(LimitExceeded, match=f"{filetype.upper()} embedded PNG image is {PIXELS}"):
        _partition(path, filetype)


def test_pdf_image_bomb_fails_before_ocr_render(tmp_path):
    path = scanned_pdf_with_huge_image(tmp_path / "scan-bomb.pdf")
    with pytest.raises(LimitExceeded, match=f"an image on PDF page 1 is {PIXELS}"):
        _partition(path, "pdf")


# -- charsets ---------------------------------------------------------------------------------

@pytest.mark.parametrize("charset,body", [("x-unknown-foo", "naïve café".encode("utf-8")),
                                          ("x-mac-hebrew", "שלום".encode("cp1255")),
                                          ("x-euc-tw", b"plain ascii words")])
def test_email_with_unknown_charset_decodes_with_fallback(tmp_path, charset, body):
    path = tmp_path / "mail.eml"
    path.write_bytes(_eml(charset, b"CSMARKER " + body + b" end of body."))
    text = _text(_partition(path, "eml"))
    assert "CSMARKER" in text and "end of body" in text
    if charset == "x-unknown-foo":
        assert "naïve café" in text  # valid UTF-8 is kept as such


@pytest.mark.parametrize("charset,word,codec", [("windows-874", "สวัสดี", "cp874"),
                                                ("iso-8859-6-i", "مرحبا", "iso8859_6"),
                                                ("x-mac-cyrillic", "Привет", "mac_cyrillic"),
                                                ("x-gbk", "你好", "gbk")])
@pytest.mark.parametrize("declaration", ['<meta charset="{}">',
                                         '<meta http-equiv="Content-Type" content="text/html; charset={}">'])
def test_html_declared_alias_charset_is_used(tmp_path, charset, word, codec, declaration):
    path = tmp_path / "page.html"
    path.write_bytes(f"<html><head>{declaration.format(charset)}</head><body><p>".encode()
                     + f"CSMARKER {word} paragraph text.".encode(codec) + b"</p></body></html>")
    assert f"CSMARKER {word} paragraph text." in _text(_partition(path, "html"))


def test_decode_html_fallbacks():
    from stages.charsets import decode_html

    assert decode_html(b'<meta charset="x-unknown-foo"><p>caf\xc3\xa9</p>').endswith("café</p>")
    assert decode_html(b'\xef\xbb\xbf<meta charset="latin-1"><p>caf\xc3\xa9</p>').endswith("café</p>")
    decode_html(b"<meta charset=\"bogus\"><p>\xff\xfe\xfd</p>")  # never raises


# -- nesting through other readers ------------------------------------------------------------

def test_markdown_nested_past_lxml_depth(tmp_path):
    path = tmp_path / "quotes.md"
    path.write_text("> " * 1000 + "DEEPMARKER quoted\n")
    assert "DEEPMARKER" in _text(_partition(path, "md"))


def test_html_mail_body_nested_past_lxml_depth(tmp_path):
    path = tmp_path / "deep.eml"
    body = "<html><body>" + "<div>" * 1000 + "<p>DEEPMARKER in mail</p>" + "</div>" * 1000 + "</body></html>"
    path.write_bytes(_eml("utf-8", body.encode(), subtype="html"))
    assert "DEEPMARKER" in _text(_partition(path, "eml"))


@pytest.mark.parametrize("tag", ["item", "a"])  # "a": HTML-like names in an XML file stay XML
def test_xml_nested_past_lxml_depth(tmp_path, tag):
    """lxml refuses XML deeper than 256 ("Excessive depth"): it failed as corrupt."""
    from stages.detect import detect_type

    path = tmp_path / "deep.xml"
    path.write_text('<?xml version="1.0"?><root><title>Head</title>' + f"<{tag}>" * 3000
                    + "DEEPMARKER in xml" + f"</{tag}>" * 3000 + "<tail>TAILMARKER</tail></root>")
    assert detect_type(path).filetype == "xml"
    text = _text(_partition(path, "xml"))
    assert "DEEPMARKER" in text and "TAILMARKER" in text and "Head" in text


# -- sheets -----------------------------------------------------------------------------------

def test_far_corner_sheet_has_the_limit_code(tmp_path):
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"] = "XLSXMARKER"
    sheet.cell(row=1_048_576, column=1, value="far row")
    sheet.cell(row=1, column=16_384, value="far column")
    book.save(tmp_path / "far.xlsx")
    with pytest.raises(LimitExceeded, match=r"17,179,869,184 cells, limit 5,000,000") as info:
        _partition(tmp_path / "far.xlsx", "xlsx")
    assert info.value.code == "limit_exceeded"


def test_wide_csv_fails_before_dense_load(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSTREAM_MAX_SHEET_CELLS", "1000")
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(",".join(f"CSVMARKER{i}x{j}" for j in range(100)) for i in range(20)) + "\n")
    with pytest.raises(LimitExceeded, match=r"rows × 100 columns = 1,100 cells, limit 1,000"):
        _partition(path, "csv")


@pytest.mark.parametrize("raw", [b"\xed\xa0\x80", "caf\u00e9 na\u00efve".encode("cp1252")])
def test_csv_with_bytes_that_are_not_utf8_is_text_not_corrupt(tmp_path, raw):
    """An encoded lone surrogate or a legacy charset in a CSV: the rows are text."""
    path = tmp_path / "odd.csv"
    path.write_bytes(b"name,note\nCSVMARKER," + raw + b"\nsecond,row\n")
    text = _text(_partition(path, "csv"))
    assert "CSVMARKER" in text and "second" in text


# -- the fixed siblings through the whole pipeline --------------------------------------------

@pytest.mark.integration
def test_siblings_through_the_pipeline(stack, worker, project, tmp_path):
    """The same verdicts from the workers: text COMPLETED, bombs FAILED with the
    pixel limit, the worker unharmed."""
    from tests.conftest import ingest

    files = [picture_only_docx(tmp_path / "bomb.docx", BOMB_PNG.read_bytes()),
             scanned_pdf_with_huge_image(tmp_path / "scan-bomb.pdf"),
             tmp_path / "mail.eml", tmp_path / "quotes.md"]
    files[2].write_bytes(_eml("x-unknown-foo", "CSMARKER naïve café end of body.".encode("utf-8")))
    files[3].write_text("> " * 1000 + "DEEPMARKER quoted\n")
    outcome = ingest(files, project, timeout_s=600)
    assert not outcome.timed_out
    by_name = {r.path.name: outcome.last[r.document_id] for r in outcome.results}
    for name in ("bomb.docx", "scan-bomb.pdf"):
        assert by_name[name].status == "FAILED", (name, by_name[name])
        assert by_name[name].error_code == "limit_exceeded", (name, by_name[name].error)
        assert "400,000,000 pixels, limit 89,478,485" in by_name[name].error
    for name in ("mail.eml", "quotes.md"):
        assert by_name[name].status == "COMPLETED", (name, by_name[name].error)
    assert worker.poll() is None
