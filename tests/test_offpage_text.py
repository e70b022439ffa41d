"""Text drawn outside the page box is not extracted (stages/offpage_text.py): a
spread exported as two pages gave each page the other's text (the shared corpus's
reliance.pdf, pages 2 and 3).  The PDFs here are made with reportlab: words and a
ruled table inside the page, the same drawn past its right edge, directly and
inside a form XObject (the spread's case)."""
from __future__ import annotations

from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from stages.partition import partition_file
from stages.profiles import get_profile

WIDTH, HEIGHT = A4


def _grid(c: canvas.Canvas, x: float, y: float, word: str) -> None:
    """A 3 x 3 ruled table at (x, y) (bottom left), cells ``<word> r<i>c<j>``."""
    cw, ch = 110, 22
    for i in range(4):
        c.line(x, y + i * ch, x + 3 * cw, y + i * ch)
        c.line(x + i * cw, y, x + i * cw, y + 3 * ch)
    for r in range(3):
        for col in range(3):
            c.drawString(x + col * cw + 6, y + (2 - r) * ch + 7, f"{word} r{r}c{col}")


def _spread_pdf(path: Path) -> Path:
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica", 11)
    c.drawString(72, HEIGHT - 72, "Visible heading about pump stations")
    c.drawString(72, HEIGHT - 100, "The visible paragraph talks about energy use per megalitre.")
    _grid(c, 72, HEIGHT - 260, "seen")
    c.drawString(WIDTH + 60, HEIGHT - 72, "Offpage heading about tariffs")
    _grid(c, WIDTH + 60, HEIGHT - 260, "hidden")
    c.beginForm("spread")  # the other half of a spread, inside a form XObject
    c.drawString(WIDTH + 80, HEIGHT - 400, "Formpage sentence beyond the edge.")
    c.drawString(100, HEIGHT - 400, "Formvisible sentence inside the page.")
    c.endForm()
    c.doForm("spread")
    c.showPage()
    c.save()
    return path


def test_text_and_tables_drawn_outside_the_page_are_not_extracted(tmp_path):
    elements = partition_file(_spread_pdf(tmp_path / "spread.pdf"), "pdf", get_profile(None))
    text = " ".join(e["text"] for e in elements)
    assert "Visible heading" in text and "energy use per megalitre" in text
    assert "Formvisible sentence" in text
    assert "seen r1c1" in text
    for offpage in ("Offpage", "tariffs", "hidden", "Formpage"):
        assert offpage not in text, f"{offpage!r} was drawn outside the page: {text}"
    tables = [e for e in elements if e["type"] == "Table"]
    assert all("hidden" not in (e["metadata"].get("text_as_html") or "") for e in tables)
