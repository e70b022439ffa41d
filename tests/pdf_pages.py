"""A PDF page with one line of Helvetica text, built with pikepdf (tests of PDF
parsing limits: test_pdf_bombs, test_glyph_garbage)."""
from __future__ import annotations

import pikepdf


def text_page(pdf: pikepdf.Pdf, text: str) -> pikepdf.Page:
    """A US-letter page of ``pdf`` showing ``text`` at 14 pt (a real text layer)."""
    font = pdf.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1,
                                                BaseFont=pikepdf.Name.Helvetica))
    page = pikepdf.Page(pikepdf.Dictionary(Type=pikepdf.Name.Page, MediaBox=[0, 0, 612, 792],
                                           Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font))))
    page.obj["/Contents"] = pdf.make_stream(f"BT /F1 14 Tf 72 700 Td ({text}) Tj ET".encode())
    return page
