"""Text layers of unmapped glyphs (issue 24 kind 4): a page whose text is ``(cid:N)``
runs is never indexed; it is OCR'd, or reported when OCR finds nothing."""
from __future__ import annotations

from pathlib import Path

import pikepdf
import pytest

from tests.pdf_pages import text_page

from stages.errors import EmptyDocument
from stages.glyph_garbage import garbage_ratio, unreadable
from stages.partition import partition_file
from stages.profiles import Profile


def test_garbage_ratio():
    assert garbage_ratio("(cid:12)(cid:7)(cid:300)") == 1.0
    assert garbage_ratio("Revenue grew 12 % (see note 3).") == 0.0
    assert garbage_ratio("") == 0.0
    assert 0.4 < garbage_ratio("abcde\ufffd\ufffd\ue000\ue001\ue002") < 0.6
    assert unreadable("(cid:3)" * 10) and not unreadable("(cid:3)")  # too short to judge
    assert not unreadable("A normal page that cites (cid:3) once among many ordinary words.")


def _cid_page(pdf: pikepdf.Pdf) -> pikepdf.Page:
    """A page drawn with a Type0 Identity-H font that has no ToUnicode and no
    embedded program: pdfminer reads it as ``(cid:N)`` runs."""
    descriptor = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.FontDescriptor, FontName=pikepdf.Name("/NoSuchCIDFont"), Flags=4,
        FontBBox=[0, 0, 1000, 1000], ItalicAngle=0, Ascent=800, Descent=-200, CapHeight=700, StemV=80))
    cid_font = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.CIDFontType0, BaseFont=pikepdf.Name("/NoSuchCIDFont"),
        CIDSystemInfo=pikepdf.Dictionary(Registry=pikepdf.String("Adobe"), Ordering=pikepdf.String("Identity"),
                                         Supplement=0), FontDescriptor=descriptor))
    font = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type0, BaseFont=pikepdf.Name("/NoSuchCIDFont"),
        Encoding=pikepdf.Name("/Identity-H"), DescendantFonts=[cid_font]))
    page = pikepdf.Page(pikepdf.Dictionary(Type=pikepdf.Name.Page, MediaBox=[0, 0, 612, 792],
                                           Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font))))
    codes = "".join(f"{0x100 + i * 7:04x}" for i in range(60))
    page.obj["/Contents"] = pdf.make_stream(f"BT /F1 14 Tf 72 700 Td <{codes}> Tj ET".encode())
    return page


def test_unmapped_glyph_page_is_never_indexed(tmp_path: Path):
    pdf = pikepdf.new()
    pdf.pages.append(text_page(pdf, "READABLEMARKER the first page reads as text"))
    pdf.pages.append(_cid_page(pdf))
    mixed = tmp_path / "mixed.pdf"
    pdf.save(mixed)
    elements = partition_file(mixed, "pdf", Profile(name="default"))
    text = "\n".join(e["text"] for e in elements)
    assert "READABLEMARKER" in text and "(cid:" not in text

    only = pikepdf.new()
    only.pages.append(_cid_page(only))
    path = tmp_path / "cid-only.pdf"
    only.save(path)
    with pytest.raises(EmptyDocument, match=r"page\(s\) 1 is unmapped glyphs"):
        partition_file(path, "pdf", Profile(name="default"))
    with pytest.raises(EmptyDocument, match=r"OCR is not available or off"):
        partition_file(path, "pdf", Profile(name="fast-only", strategy="fast"))
