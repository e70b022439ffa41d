"""Builders of long documents for the split-into-parts tests (tests/test_document_parts.py, bench/long_docx.py).

Every builder writes ``pages`` "pages" of unique text: page ``p`` holds the marker
``mark-p-k`` in paragraph/cell/row ``k``, so a test can check that every marker comes
out once and in order.  Text is taken from a real document of the repository (the
README) so words repeat as in prose, not as in a loop of one sentence.
"""
from __future__ import annotations

import re
from pathlib import Path

_README = Path(__file__).resolve().parents[1] / "README.md"
_vocab: list[str] = []


def use_text(text: str) -> int:
    """Take prose from ``text`` (e.g. the text of real documents, see
    :func:`corpus_text`) instead of the README; returns its word count."""
    _vocab[:] = re.findall(r"[A-Za-z][A-Za-z'-]+", text)
    return len(_vocab)


def corpus_text(folder: Path) -> str:
    """The text of every PDF and DOCX under ``folder`` (pypdf, python-docx), in name order."""
    import docx
    import pypdf

    out = []
    for f in sorted(Path(folder).rglob("*")):
        try:
            if f.suffix.lower() == ".pdf":
                out += [page.extract_text() or "" for page in pypdf.PdfReader(f).pages]
            elif f.suffix.lower() == ".docx":
                out += [p.text for p in docx.Document(f).paragraphs]
        except Exception:  # noqa: BLE001 - a file that does not read adds no prose
            continue
    return "\n".join(out)


def prose(n: int, words: int = 60) -> str:
    """Words ``n*words .. (n+1)*words`` (wrapping) of the prose source (the README's
    unless :func:`use_text` set another)."""
    if not _vocab:
        use_text(_README.read_text(encoding="utf-8"))
    start = (n * words) % max(1, len(_vocab) - words)
    return " ".join(_vocab[start:start + words])


def markers(pages: int, per_page: int) -> list[str]:
    """The markers a builder writes, in document order."""
    return [f"mark-{p}-{k}" for p in range(1, pages + 1) for k in range(per_page)]


def long_docx(path: Path, pages: int, per_page: int = 5, sections_every: int = 0,
              table_every: int = 4) -> Path:
    """A DOCX of ``pages`` pages: a heading per page (starting with a rendered page
    break after page 1, as Word saves them), ``per_page`` marked paragraphs, a 3×3
    table every ``table_every`` pages (its cells marked ``cell-p-r-c``), a header and
    footer, and a new section with its own header every ``sections_every`` pages."""
    import docx
    from docx.enum.section import WD_SECTION
    from docx.oxml import OxmlElement

    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = "HEADER-0"
    d.sections[0].footer.paragraphs[0].text = "FOOTER-0"
    for p in range(1, pages + 1):
        heading = d.add_heading(f"Chapter {p}", level=1)
        if p > 1:
            run = OxmlElement("w:r")
            run.append(OxmlElement("w:lastRenderedPageBreak"))
            heading._p.insert(1 if heading._p.pPr is not None else 0, run)
        for k in range(per_page):
            d.add_paragraph(f"mark-{p}-{k} {prose(p * per_page + k)}")
        if table_every and p % table_every == 0:
            table = d.add_table(rows=3, cols=3)
            for r in range(3):
                for c in range(3):
                    table.cell(r, c).text = f"cell-{p}-{r}-{c}"
        if sections_every and p % sections_every == 0 and p < pages:
            section = d.add_section(WD_SECTION.NEW_PAGE)
            section.header.is_linked_to_previous = False
            section.header.paragraphs[0].text = f"HEADER-{p}"
    d.save(path)
    return path


def long_pptx(path: Path, slides: int, per_page: int = 3) -> Path:
    """A PPTX of ``slides`` slides, each a title and ``per_page`` marked paragraphs,
    with speaker notes ``notes-p``."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    for p in range(1, slides + 1):
        slide = prs.slides.add_slide(prs.slide_layouts[5])
        slide.shapes.title.text = f"Slide {p}"
        frame = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(8), Inches(4)).text_frame
        frame.text = f"mark-{p}-0 {prose(p)}"
        for k in range(1, per_page):
            frame.add_paragraph().text = f"mark-{p}-{k} {prose(p * per_page + k)}"
        slide.notes_slide.notes_text_frame.text = f"notes-{p}"
    prs.save(path)
    return path


def long_xlsx(path: Path, sheets: int, rows: int = 40) -> Path:
    """An XLSX of ``sheets`` sheets of ``rows`` rows (``mark-s-r`` and prose), with a
    sheet-scoped defined name on each."""
    from openpyxl import Workbook
    from openpyxl.workbook.defined_name import DefinedName

    wb = Workbook()
    wb.remove(wb.active)
    for s in range(1, sheets + 1):
        ws = wb.create_sheet(f"Sheet{s}")
        ws.append(["id", "text"])
        for r in range(rows):
            ws.append([f"mark-{s}-{r}", prose(s * rows + r, 12)])
        ws.defined_names["Area"] = DefinedName("Area", attr_text=f"Sheet{s}!$A$1:$B$3")
    wb.active = sheets - 1
    wb.save(path)
    return path


def long_html(path: Path, pages: int, per_page: int = 4, charset: str = "windows-1252") -> Path:
    """An HTML page whose content sits in one wrapper div (the spine is found below
    it): per page an h2 and ``per_page`` marked paragraphs with a non-ASCII word, in
    ``charset`` as its meta tag declares."""
    body = "".join(
        f"<h2>Chapter {p}</h2>" + "".join(
            f"<p>mark-{p}-{k} caf\u00e9 {prose(p * per_page + k)}</p>" for k in range(per_page))
        for p in range(1, pages + 1))
    html = (f'<html><head><meta charset="{charset}"><title>Long</title></head>'
            f'<body><div id="wrap"><div class="content">{body}</div></div></body></html>')
    path.write_bytes(html.encode(charset))
    return path


def long_markdown(path: Path, pages: int, per_page: int = 4) -> Path:
    """Markdown: per page a heading, ``per_page`` marked paragraphs and a fenced code
    block with a blank line inside (a part never starts inside a fence)."""
    out = []
    for p in range(1, pages + 1):
        out.append(f"# Chapter {p}\n\n")
        for k in range(per_page):
            out.append(f"mark-{p}-{k} {prose(p * per_page + k)}\n\n")
        out.append(f"```\ncode-{p} first\n\ncode-{p} second\n```\n\n")
    path.write_text("".join(out), encoding="utf-8")
    return path


def long_text(path: Path, pages: int, per_page: int = 4, encoding: str = "utf-16-le") -> Path:
    """Plain text in ``encoding`` (default UTF-16 without a byte-order mark), marked
    paragraphs separated by blank lines."""
    out = "".join(f"mark-{p}-{k} {prose(p * per_page + k)}\n\n"
                  for p in range(1, pages + 1) for k in range(per_page))
    path.write_bytes(out.encode(encoding))
    return path
