"""normalize_file + partition_file on generated samples, broken files and the corpus."""
from __future__ import annotations

import base64
import concurrent.futures as cf
import multiprocessing
import shutil
import time
from collections import Counter
from pathlib import Path

import orjson
import pypdf
import pytest

from stages.errors import (ConversionFailed, ConversionTimeout, CorruptDocument, DocumentError,
                           EmptyDocument, EncryptedDocument, OCRUnavailable, TooLarge)
from stages.normalize import normalize_file, page_ranges
from stages.office import find_soffice
from stages.partition import partition_file, tesseract_available
from stages.profiles import DEFAULT_PROFILES, Profile
from stages.samples import chart_png, generate_samples
from tests.conftest import CORPUS  # beside the checkout, or RAGSTREAM_CORPUS

PROFILE = DEFAULT_PROFILES["default"]


@pytest.fixture
def no_tesseract(monkeypatch, tmp_path):
    """PATH without tesseract (the deployment without OCR), whether or not it is installed."""
    import shutil
    import sys

    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    if shutil.which("tesseract"):
        pytest.skip("tesseract is in the virtualenv's bin directory")


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    pdf, docx, html = generate_samples(tmp_path_factory.mktemp("samples"))
    return {"pdf": pdf, "docx": docx, "html": html}


@pytest.fixture(scope="module")
def pdf_elements(samples):
    return partition_file(samples["pdf"], "pdf", PROFILE)


def _process(src: Path, tmp_path: Path, profile: Profile = PROFILE) -> list[dict]:
    norm = normalize_file(src, tmp_path / "work", profile)
    return partition_file(norm.path, norm.filetype, profile)


def _tables(elements):
    return [e for e in elements if e["type"] == "Table"]


def test_pdf_sample_elements(pdf_elements):
    types = Counter(e["type"] for e in pdf_elements)
    assert types["NarrativeText"] >= 5 and types["Title"] >= 1
    pages = {e["metadata"]["page_number"] for e in pdf_elements}
    assert min(pages) >= 1 and len(pages) >= 3
    (table,) = _tables(pdf_elements)
    html = table["metadata"]["text_as_html"]
    assert html.startswith("<table>") and html.count("<tr>") == 5
    assert "<td>North Basin</td><td>120</td><td>99.2</td><td>410</td>" in html
    # the cells are not repeated as loose text elements
    assert not any(e["text"] == "North Basin" for e in pdf_elements)
    (image,) = [e for e in pdf_elements if e["type"] == "Image"]
    assert base64.b64decode(image["metadata"]["image_base64"]).startswith(b"\x89PNG")
    assert image["metadata"]["page_number"] == table["metadata"]["page_number"]
    assert len({e["element_id"] for e in pdf_elements}) == len(pdf_elements)


def test_elements_serialise_with_orjson(pdf_elements):
    assert orjson.loads(orjson.dumps(pdf_elements))[0]["metadata"]["page_number"] == 1


def test_pdf_page_range_keeps_numbers_and_ids(samples, pdf_elements):
    part = partition_file(samples["pdf"], "pdf", PROFILE, pages=(2, 3))
    assert {e["metadata"]["page_number"] for e in part} == {2, 3}
    whole = {e["element_id"] for e in pdf_elements if e["metadata"]["page_number"] >= 2}
    assert {e["element_id"] for e in part} == whole
    with pytest.raises(ValueError):
        partition_file(samples["pdf"], "pdf", PROFILE, pages=(3, 9))


@pytest.mark.parametrize("kind", ["docx", "html"])
def test_docx_and_html_samples_have_tables(samples, tmp_path, kind):
    elements = _process(samples[kind], tmp_path)
    (table,) = _tables(elements)
    assert "<td>West Hollow</td>" in table["metadata"]["text_as_html"] or \
        "West Hollow" in table["metadata"]["text_as_html"]
    assert {"Title", "NarrativeText"} <= {e["type"] for e in elements}


def test_normalize_reports_pdf_pages(samples, tmp_path):
    norm = normalize_file(samples["pdf"], tmp_path, PROFILE)
    assert (norm.filetype, norm.converted, norm.path) == ("pdf", False, samples["pdf"])
    assert norm.page_count >= 3 and norm.page_ranges == [(1, norm.page_count)]
    assert page_ranges(7, 3) == [(1, 3), (4, 6), (7, 7)]


def test_pdf_named_txt_is_partitioned_as_pdf(samples, tmp_path):
    src = shutil.copy(samples["pdf"], tmp_path / "notes.txt")
    norm = normalize_file(src, tmp_path / "work", PROFILE)
    assert norm.filetype == "pdf" and "content is PDF but name says .txt" in norm.reason
    assert _tables(partition_file(norm.path, norm.filetype, PROFILE))


def test_png_named_pdf_needs_ocr(tmp_path, no_tesseract):
    src = tmp_path / "scan.pdf"
    src.write_bytes(chart_png())
    norm = normalize_file(src, tmp_path / "work", PROFILE)
    assert norm.filetype == "png" and "content is PNG but name says .pdf" in norm.reason
    with pytest.raises(OCRUnavailable, match="PNG image needs OCR and tesseract is not installed"):
        partition_file(norm.path, norm.filetype, PROFILE)


def test_zero_byte_file(tmp_path):
    src = tmp_path / "empty.pdf"
    src.write_bytes(b"")
    with pytest.raises(EmptyDocument, match="^zero-byte file$"):
        normalize_file(src, tmp_path, PROFILE)
    with pytest.raises(EmptyDocument, match="^zero-byte file$"):
        partition_file(src, "pdf", PROFILE)


def test_too_large(samples, tmp_path):
    with pytest.raises(TooLarge, match="over profile 'tiny' limit"):
        normalize_file(samples["pdf"], tmp_path, Profile(name="tiny", max_size_bytes=1000))


def test_encrypted_pdf(samples, tmp_path):
    writer = pypdf.PdfWriter(clone_from=samples["pdf"])
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    src = tmp_path / "locked.pdf"
    writer.write(src)
    with pytest.raises(EncryptedDocument, match="^encrypted PDF") as info:
        normalize_file(src, tmp_path / "work", PROFILE)
    assert info.value.permanent
    with pytest.raises(EncryptedDocument, match="^encrypted PDF"):
        partition_file(src, "pdf", PROFILE)


def test_copy_protected_pdf_opens(samples, tmp_path):
    writer = pypdf.PdfWriter(clone_from=samples["pdf"])
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    src = tmp_path / "protected.pdf"
    writer.write(src)
    norm = normalize_file(src, tmp_path / "work", PROFILE)
    assert "empty user password" in norm.reason
    assert _tables(partition_file(norm.path, "pdf", PROFILE))


@pytest.mark.parametrize("fraction", [0.2, 0.6, 0.95])
def test_truncated_pdf(samples, tmp_path, fraction):
    data = samples["pdf"].read_bytes()
    src = tmp_path / "cut.pdf"
    src.write_bytes(data[: int(len(data) * fraction)])
    try:
        norm = normalize_file(src, tmp_path / "work", PROFILE)
    except CorruptDocument as exc:
        assert exc.reason.startswith("truncated or corrupt PDF: ") and exc.permanent
        with pytest.raises(CorruptDocument, match="^truncated or corrupt PDF: "):
            partition_file(src, "pdf", PROFILE)
        return
    # qpdf rebuilt what was there: the pages that survived must still give elements
    assert "repaired" in norm.reason
    assert partition_file(norm.path, "pdf", PROFILE)


def test_truncated_docx(samples, tmp_path):
    data = samples["docx"].read_bytes()
    src = tmp_path / "cut.docx"
    src.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptDocument, match="^truncated or corrupt DOCX: "):
        _process(src, tmp_path)
    with pytest.raises(CorruptDocument, match="^truncated or corrupt DOCX: "):
        partition_file(src, "docx", PROFILE)  # without normalize's ZIP check


def test_whitespace_text_is_empty_document(tmp_path):
    src = tmp_path / "blank.txt"
    src.write_text("   \n\n  \t\n")
    with pytest.raises(EmptyDocument, match="^TXT has no text content"):
        _process(src, tmp_path)


def test_blank_pdf_is_empty_document(tmp_path):
    writer = pypdf.PdfWriter()
    writer.add_blank_page(612, 792)
    writer.add_blank_page(612, 792)
    src = tmp_path / "blank.pdf"
    writer.write(src)
    with pytest.raises(EmptyDocument, match="^PDF pages 1-2 are blank"):
        _process(src, tmp_path)


def test_image_only_pdf_fails_specifically(tmp_path, no_tesseract):
    from PIL import Image

    src = tmp_path / "scan.pdf"
    Image.open(__import__("io").BytesIO(chart_png())).save(src, format="PDF")
    with pytest.raises(OCRUnavailable, match="no text layer .* tesseract not installed"):
        _process(src, tmp_path)
    with pytest.raises(OCRUnavailable, match="strategy 'fast'"):
        _process(src, tmp_path, PROFILE.with_strategy("fast"))


def test_office_to_pdf_needs_soffice(samples, tmp_path):
    legal = DEFAULT_PROFILES["legal"]
    if find_soffice() is None:
        with pytest.raises(ConversionFailed, match=r"LibreOffice \(soffice\) not installed"):
            normalize_file(samples["docx"], tmp_path, legal)
    else:
        norm = normalize_file(samples["docx"], tmp_path, legal)
        assert norm.converted and norm.filetype == "pdf" and norm.page_count >= 1


def test_timeout_is_specific(samples, tmp_path):
    writer = pypdf.PdfWriter()
    for _ in range(10):
        writer.append(str(samples["pdf"]))
    src = tmp_path / "long.pdf"
    writer.write(src)
    with pytest.raises(ConversionTimeout, match="^partitioning PDF timed out after 0.2 s$") as info:
        partition_file(src, "pdf", Profile(timeout_s=0.2))
    assert info.value.permanent  # the profile's budget: a retry would spend it again
    assert partition_file(samples["pdf"], "pdf", PROFILE)  # the alarm is gone afterwards


def test_errors_pickle_with_reason():
    import pickle

    err = pickle.loads(pickle.dumps(EncryptedDocument("encrypted PDF (password required to open)")))
    assert err.reason.startswith("encrypted PDF") and err.permanent and err.kind == "EncryptedDocument"


def test_partition_in_a_fresh_spawned_process(samples):
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        elements = pool.submit(partition_file, samples["pdf"], "pdf", PROFILE).result(timeout=180)
        assert _tables(elements) and len({e["metadata"]["page_number"] for e in elements}) >= 3
        with pytest.raises(EncryptedDocument):
            writer = pypdf.PdfWriter(clone_from=samples["pdf"])
            writer.encrypt(user_password="pw", algorithm="AES-128")
            locked = samples["pdf"].with_name("locked-spawn.pdf")
            writer.write(locked)
            pool.submit(partition_file, locked, "pdf", PROFILE).result(timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
def test_corpus_every_file_gives_elements_or_a_specific_reason(tmp_path):
    rows, bad = [], []
    for src in sorted(p for p in CORPUS.rglob("*") if p.is_file()):
        start = time.perf_counter()
        try:
            norm = normalize_file(src, tmp_path / src.name, PROFILE)
            elements = partition_file(norm.path, norm.filetype, PROFILE, filename=src.name)
            orjson.dumps(elements)  # what the agent stores: must serialise as is
            types = Counter(e["type"] for e in elements)
            outcome = f"{len(elements)} elements " + ", ".join(f"{k}={v}" for k, v in sorted(types.items()))
            if not elements:
                bad.append(f"{src.name}: zero elements without an error")
        except DocumentError as exc:
            outcome = f"{exc.kind}: {exc.reason}"
            if len(exc.reason) < 12 or exc.reason.lower() in ("failed", "error"):
                bad.append(f"{src.name}: vague reason {exc.reason!r}")
            if src.suffix.lower() in (".jpg", ".jpeg", ".png") and not tesseract_available():
                assert isinstance(exc, OCRUnavailable), outcome
        rows.append((str(src.relative_to(CORPUS)), f"{time.perf_counter() - start:6.2f}s", outcome))
    width = max(len(r[0]) for r in rows)
    print("\n" + "\n".join(f"{name:<{width}}  {secs}  {outcome}" for name, secs, outcome in rows))
    assert not bad, bad


NEEDS_TESSERACT = pytest.mark.skipif(not tesseract_available(), reason="tesseract not installed")


def _scanned_page(pdf: Path, out: Path, number: int = 1, dpi: int = 150) -> Path:
    """A page of ``pdf`` rendered to an image and saved as an image-only PDF/PNG."""
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(pdf))
    try:
        image = doc[number - 1].render(scale=dpi / 72).to_pil().convert("RGB")
    finally:
        doc.close()
    image.save(out, format="PDF" if out.suffix == ".pdf" else "PNG", resolution=dpi)
    return out


@NEEDS_TESSERACT
def test_mixed_pdf_ocrs_only_the_scanned_page(samples, tmp_path):
    scan = _scanned_page(samples["pdf"], tmp_path / "scan.pdf")
    writer = pypdf.PdfWriter(clone_from=samples["pdf"])
    writer.append(str(scan))
    src = tmp_path / "mixed.pdf"
    writer.write(src)
    elements = _process(src, tmp_path)
    last = [e for e in elements if e["metadata"]["page_number"] == 4]
    assert any("Executive summary" in e["text"] for e in last)
    assert _tables(elements) and {1, 2, 3, 4} <= {e["metadata"]["page_number"] for e in elements}


@NEEDS_TESSERACT
def test_png_named_pdf_is_ocred(samples, tmp_path):
    src = _scanned_page(samples["pdf"], tmp_path / "page.png")
    src = src.rename(tmp_path / "page.pdf")
    elements = _process(src, tmp_path)
    assert any("Riverside Water Authority" in e["text"] for e in elements)
    assert {e["metadata"]["page_number"] for e in elements} == {1}


def _ole(stream_name: str) -> bytes:
    return b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504 + stream_name.encode("utf-16-le") + b"\x00" * 512


def test_encrypted_office_package(tmp_path):
    src = tmp_path / "budget.xlsx"
    src.write_bytes(_ole("EncryptedPackage"))
    with pytest.raises(EncryptedDocument, match=r"^encrypted XLSX \(password-protected"):
        normalize_file(src, tmp_path / "work", PROFILE)


def test_legacy_doc_needs_libreoffice(tmp_path):
    src = tmp_path / "memo.doc"
    src.write_bytes(_ole("WordDocument"))
    if find_soffice() is None:
        with pytest.raises(ConversionFailed, match=r"LibreOffice \(soffice\) not installed; cannot convert DOC") as info:
            normalize_file(src, tmp_path / "work", PROFILE)
        assert info.value.permanent
    else:  # a fake OLE file: LibreOffice must fail with a reason, not hang
        with pytest.raises(DocumentError):
            normalize_file(src, tmp_path / "work", PROFILE)


def test_unknown_binary_is_unsupported(tmp_path):
    from stages.errors import UnsupportedType

    src = tmp_path / "blob.pdf"
    src.write_bytes(bytes(range(256)) * 16)
    with pytest.raises(UnsupportedType, match="^unrecognised binary content"):
        normalize_file(src, tmp_path / "work", PROFILE)


@pytest.mark.parametrize("ocr", [True, False], ids=["tesseract", "no-tesseract"])
def test_image_only_pptx(samples, tmp_path, request, ocr):
    from pptx import Presentation
    from pptx.util import Inches

    png = _scanned_page(samples["pdf"], tmp_path / "slide.png", dpi=120)
    deck = Presentation()
    for _ in range(2):
        slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank layout
        slide.shapes.add_picture(str(png), Inches(0.5), Inches(0.2), height=Inches(7))
    src = tmp_path / "scans.pptx"
    deck.save(src)
    if not ocr:
        request.getfixturevalue("no_tesseract")
    elif not tesseract_available():
        pytest.skip("tesseract not installed")
    if not tesseract_available():
        with pytest.raises(EmptyDocument, match=r"^PPTX has no text, only 1 embedded image\(s\) \(tesseract not installed\)$"):
            _process(src, tmp_path)
        return
    elements = _process(src, tmp_path)
    assert any("Executive summary" in e["text"] for e in elements)
    assert {e["metadata"]["page_number"] for e in elements} == {1, 2}
    orjson.dumps(elements)
