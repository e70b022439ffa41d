"""The project's own sample documents (no external files), byte-for-byte deterministic.

``generate_samples(out_dir)`` writes:

* ``sample-report.pdf`` — 3+ pages: headings, prose paragraphs, a ruled 5×4 table
  with a header row and an embedded PNG chart drawn with Pillow (reportlab,
  ``invariant=1`` so creation dates and ids do not vary).
* ``sample-report.docx`` — headings, paragraphs and a 5×4 table (python-docx; fixed
  core-property dates and zip timestamps).
* ``sample-report.html`` — headings, paragraphs and a 5×4 table.

The table is ``TABLE`` (header + 4 rows) in all three, so tests can check cells.
"""
from __future__ import annotations

import datetime as _dt
import html as _html
import io
import zipfile
from pathlib import Path

TITLE = "Riverside Water Authority: Annual Operations Review"
TABLE = [
    ["Plant", "Capacity (ML/day)", "Uptime (%)", "Energy (kWh/ML)"],
    ["North Basin", "120", "99.2", "410"],
    ["East Ridge", "85", "98.7", "455"],
    ["South Quay", "64", "97.9", "502"],
    ["West Hollow", "42", "99.5", "388"],
]
SECTIONS = [
    ("Executive summary", [
        "The authority treated and delivered 112 billion litres of drinking water during the "
        "year, a four percent increase on the previous period, while holding the average "
        "household tariff flat for the second consecutive year.",
        "Reliability remained the central operating objective. Unplanned interruptions fell "
        "to 0.31 per thousand connections, and the median restoration time after a main "
        "break dropped from four hours and ten minutes to three hours and twenty minutes.",
        "Capital spending reached 86 million, most of it directed at the replacement of cast "
        "iron distribution mains installed before 1960 and at the second stage of the "
        "membrane filtration upgrade at North Basin.",
    ]),
    ("Treatment performance", [
        "All four treatment plants met the health-based targets for microbial and chemical "
        "quality in every monthly compliance sample. Turbidity after filtration stayed "
        "below 0.2 NTU for more than ninety-nine percent of operating hours.",
        "Seasonal algal blooms in the upper reservoir required powdered activated carbon "
        "dosing for eleven weeks in late summer. Taste and odour complaints peaked at 38 "
        "in a single week and returned to the background level within a fortnight.",
        "The laboratory commissioned a second ion chromatography line, which halved the "
        "turnaround time for disinfection by-product analysis and allowed operators to "
        "adjust chlorine dosing on the same shift rather than the following day.",
    ]),
    ("Plant capacity and energy", [
        "The table below compares design capacity, availability and specific energy use "
        "for each plant. Energy intensity is reported per megalitre of treated water "
        "leaving the plant, including raw water pumping but excluding distribution.",
        "West Hollow remains the most efficient site because it draws on gravity-fed "
        "catchment water, whereas South Quay lifts estuarine water through two pumping "
        "stages before conventional treatment.",
    ]),
    ("Network and asset renewal", [
        "Crews replaced 41 kilometres of distribution main, installed 2,300 new service "
        "connections and rehabilitated six service reservoirs. Pressure management zones "
        "now cover seventy percent of the network, up from fifty-five percent.",
        "Acoustic leak detection loggers were deployed across the older eastern suburbs. "
        "The programme located 214 hidden leaks, and estimated real losses fell by nine "
        "megalitres per day compared with the baseline survey.",
        "The asset register was migrated to a new maintenance system, linking work orders "
        "to individual pipe segments so that failure rates can be modelled by material, "
        "age, soil type and operating pressure.",
    ]),
    ("Customers and community", [
        "The customer contact centre answered eighty-six percent of calls within thirty "
        "seconds. Written complaints fell by fourteen percent, with billing queries "
        "remaining the most common category.",
        "Hardship assistance was extended to 3,900 households through payment plans and "
        "concessions. School education visits resumed at full scale, reaching more than "
        "eleven thousand students across the service area.",
    ]),
    ("Outlook", [
        "Demand forecasts indicate that the existing plants can meet peak summer demand "
        "until the end of the decade, provided that leakage targets are achieved and the "
        "North Basin membrane upgrade is completed on schedule.",
        "The coming year will focus on catchment protection, a pilot of smart meters in "
        "two suburbs and the design of a recycled water scheme for industrial customers "
        "in the southern employment precinct.",
    ]),
]
FIXED_DATE = _dt.datetime(2024, 1, 1, 0, 0, 0)


def chart_png() -> bytes:
    """A deterministic bar chart of plant capacity, drawn with Pillow (PNG bytes)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (480, 280), "white")
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, 479, 279), outline=(60, 60, 60))
    draw.line((50, 240, 460, 240), fill="black", width=2)
    draw.line((50, 30, 50, 240), fill="black", width=2)
    colours = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)]
    for i, (row, colour) in enumerate(zip(TABLE[1:], colours)):
        value = int(row[1])
        x0 = 80 + i * 95
        draw.rectangle((x0, 240 - value * 1.6, x0 + 60, 240), fill=colour, outline="black")
        draw.text((x0 + 5, 246), row[0].split()[0], fill="black")
        draw.text((x0 + 18, 240 - value * 1.6 - 14), row[1], fill="black")
    draw.text((150, 8), "Design capacity by plant (ML/day)", fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def write_pdf(path: Path) -> Path:
    """The multi-page sample PDF (see module docstring)."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import (Image, PageBreak, Paragraph, SimpleDocTemplate, Spacer,
                                    Table, TableStyle)

    styles = getSampleStyleSheet()
    styles["Heading1"].spaceBefore = styles["Heading1"].spaceAfter = 16  # clear gaps, as in typical reports
    story = [Paragraph(TITLE, styles["Title"])]
    for i, (heading, paragraphs) in enumerate(SECTIONS):
        if i in (2, 4):
            story.append(PageBreak())
        story.append(Paragraph(heading, styles["Heading1"]))
        story += [Paragraph(p, styles["BodyText"]) for p in paragraphs]
        if heading == "Plant capacity and energy":
            table = Table(TABLE, colWidths=[4 * cm, 4 * cm, 3 * cm, 4 * cm])
            table.setStyle(TableStyle([
                ("GRID", (0, 0), (-1, -1), 0.75, colors.black),
                ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey),
                ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
            ]))
            story += [Spacer(1, 0.4 * cm), table, Spacer(1, 0.6 * cm),
                      Image(io.BytesIO(chart_png()), width=12 * cm, height=7 * cm),
                      Paragraph("Figure 1. Design capacity of the four treatment plants.",
                                styles["Italic"])]
    doc = SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title=TITLE,
                            author="ragstream samples", creator="ragstream")
    doc.build(story)
    return path


def write_docx(path: Path) -> Path:
    """The sample DOCX, with fixed dates and zip timestamps."""
    import docx

    document = docx.Document()
    document.add_heading(TITLE, level=0)
    for heading, paragraphs in SECTIONS:
        document.add_heading(heading, level=1)
        for p in paragraphs:
            document.add_paragraph(p)
        if heading == "Plant capacity and energy":
            table = document.add_table(rows=len(TABLE), cols=len(TABLE[0]))
            table.style = "Table Grid"
            for r, row in enumerate(TABLE):
                for c, value in enumerate(row):
                    table.cell(r, c).text = value
    props = document.core_properties
    props.created = props.modified = FIXED_DATE
    props.last_printed = FIXED_DATE
    props.author = props.last_modified_by = "ragstream samples"
    props.revision = 1
    buf = io.BytesIO()
    document.save(buf)
    path.write_bytes(normalize_zip(buf.getvalue()))
    return path


def normalize_zip(data: bytes) -> bytes:
    """Rewrite a zip with fixed entry timestamps (byte-identical output)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def write_html(path: Path) -> Path:
    """The sample HTML page."""
    esc = _html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{esc(TITLE)}</title></head><body>", f"<h1>{esc(TITLE)}</h1>"]
    for heading, paragraphs in SECTIONS:
        parts.append(f"<h2>{esc(heading)}</h2>")
        parts += [f"<p>{esc(p)}</p>" for p in paragraphs]
        if heading == "Plant capacity and energy":
            head = "".join(f"<th>{esc(c)}</th>" for c in TABLE[0])
            body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
                           for row in TABLE[1:])
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def generate_samples(out_dir: Path) -> list[Path]:
    """Write the sample PDF, DOCX and HTML into ``out_dir`` (created if needed).

    Returns:
        ``[pdf, docx, html]`` paths.  Running it twice gives identical bytes.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [write_pdf(out_dir / "sample-report.pdf"), write_docx(out_dir / "sample-report.docx"),
            write_html(out_dir / "sample-report.html")]


def write_long_pdf(path: Path, pages: int = 300) -> Path:
    """A born-digital PDF of ``pages`` pages for scale tests: each page has a heading
    "Section N" and two paragraphs naming the page ("... on page N ..."), so a
    chunk's true page number can be checked from its text.  Deterministic bytes."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    story = []
    for n in range(1, pages + 1):
        heading, paragraphs = SECTIONS[n % len(SECTIONS)]
        story.append(Paragraph(f"Section {n}: {heading}", styles["Heading1"]))
        story.append(Paragraph(f"This paragraph is printed on page {n} of the long report. "
                               + paragraphs[0], styles["BodyText"]))
        story.append(Paragraph(paragraphs[-1], styles["BodyText"]))
        story.append(PageBreak())
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title=f"Long report ({pages} pages)",
                      creator="ragstream").build(story)
    return path
