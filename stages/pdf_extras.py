"""What unstructured's ``fast`` PDF strategy misses, recovered with pdfplumber.

``fast`` yields no Table elements (cells come out as loose Title/Text) and no
images (DESIGN.md).  ``scan_pages`` reads each page once with pdfplumber and returns
per-page facts: whether it has a text layer, its ruled tables (cells → HTML in the
same ``<table><tr><td>`` shape unstructured uses for DOCX/HTML tables) and its
sizeable images rendered to PNG (pypdfium2, via pdfplumber).  ``merge_page_items``
then replaces the loose cell elements with Table elements and inserts Image elements
in reading position.
"""
from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path

from unstructured.documents.coordinates import PixelSpace
from unstructured.documents.elements import (CoordinatesMetadata, Element, ElementMetadata,
                                             Image, Table)

MIN_IMAGE_PT = 40          # ignore images smaller than this on either side (icons, rules)
MIN_IMAGE_AREA = 0.01      # ... or under 1 % of the page
SCAN_AREA = 0.85           # an image this large on a page with text is a scan background
IMAGE_DPI = 110
IMAGE_MAX_PX = 1024


@dataclass
class PageScan:
    """Facts about one PDF page (1-based ``number``)."""

    number: int
    width: float
    height: float
    text_chars: int
    image_count: int
    items: list[Element] = field(default_factory=list)  # Table / Image elements

    @property
    def needs_ocr(self) -> bool:
        """No text layer, but images: a scanned page."""
        return self.text_chars == 0 and self.image_count > 0

    @property
    def blank(self) -> bool:
        return self.text_chars == 0 and self.image_count == 0


def scan_pages(path: Path, first: int, last: int, tables: bool, images: bool,
               filename: str | None, languages: list[str]) -> list[PageScan]:
    """Scan pages ``first..last`` (1-based, inclusive) of the PDF at ``path``.

    Returns one PageScan per page, with Table/Image elements when asked.
    Raises whatever pdfplumber/pdfminer raise on unreadable files.
    """
    import pdfplumber

    scans = []
    with pdfplumber.open(path) as pdf:
        for number in range(first, last + 1):
            page = pdf.pages[number - 1]
            chars = sum(1 for c in page.chars if not c.get("text", " ").isspace())
            scan = PageScan(number, float(page.width), float(page.height), chars, len(page.images))
            meta = dict(filename=filename, page_number=number, filetype="application/pdf",
                        languages=languages)
            if tables and chars:
                scan.items += _tables(page, scan, meta)
            if images and chars:
                scan.items += _images(page, scan, meta)
            page.close()
            scans.append(scan)
    return scans


def _coords(bbox: tuple[float, float, float, float], scan: PageScan) -> CoordinatesMetadata:
    x0, top, x1, bottom = bbox
    return CoordinatesMetadata(points=((x0, top), (x0, bottom), (x1, bottom), (x1, top)),
                               system=PixelSpace(width=scan.width, height=scan.height))


def _tables(page, scan: PageScan, meta: dict) -> list[Element]:
    out = []
    for table in page.find_tables():
        rows = [[(c or "").replace("\n", " ").strip() for c in row] for row in table.extract()]
        rows = [r for r in rows if any(r)]
        ncols = max((len(r) for r in rows), default=0)
        cells = [c for r in rows for c in r]
        if len(rows) < 2 or ncols < 2 or sum(1 for c in cells if c) < 0.5 * len(cells):
            continue  # a framed text box or a decoration, not a data table
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        text = " ".join(c for c in cells if c)
        out.append(Table(text=text, metadata=ElementMetadata(
            text_as_html=f"<table>{body}</table>", coordinates=_coords(table.bbox, scan), **meta)))
    return out


def _images(page, scan: PageScan, meta: dict) -> list[Element]:
    out = []
    page_area = scan.width * scan.height
    for im in page.images:
        x0, top = max(im["x0"], 0), max(im["top"], 0)
        x1, bottom = min(im["x1"], scan.width), min(im["bottom"], scan.height)
        w, h = x1 - x0, bottom - top
        if w < MIN_IMAGE_PT or h < MIN_IMAGE_PT or w * h < MIN_IMAGE_AREA * page_area \
                or w * h > SCAN_AREA * page_area:
            continue
        try:
            pil = page.crop((x0, top, x1, bottom)).to_image(resolution=IMAGE_DPI).original
        except Exception:  # a bad colour space etc. must not fail the document
            continue
        pil.thumbnail((IMAGE_MAX_PX, IMAGE_MAX_PX))
        buf = io.BytesIO()
        pil.convert("RGB").save(buf, format="PNG", optimize=True)
        out.append(Image(text="", metadata=ElementMetadata(
            image_base64=base64.b64encode(buf.getvalue()).decode("ascii"), image_mime_type="image/png",
            coordinates=_coords((x0, top, x1, bottom), scan), **meta)))
    return out


def _bbox(el: Element) -> tuple[float, float, float, float] | None:
    coords = el.metadata.coordinates
    if coords is None or not coords.points:
        return None
    xs = [p[0] for p in coords.points]
    ys = [p[1] for p in coords.points]
    return min(xs), min(ys), max(xs), max(ys)


def _inside(inner, outer, tol: float = 2.0) -> float:
    """Fraction of ``inner``'s area inside ``outer`` (a degenerate box counts by centre)."""
    x0, y0 = max(inner[0], outer[0] - tol), max(inner[1], outer[1] - tol)
    x1, y1 = min(inner[2], outer[2] + tol), min(inner[3], outer[3] + tol)
    area = (inner[2] - inner[0]) * (inner[3] - inner[1])
    if area <= 0:
        cx, cy = (inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2
        return float(outer[0] - tol <= cx <= outer[2] + tol and outer[1] - tol <= cy <= outer[3] + tol)
    return max(0.0, x1 - x0) * max(0.0, y1 - y0) / area


def merge_page_items(elements: list[Element], items: list[Element]) -> list[Element]:
    """Merge one page's Table/Image ``items`` into its ``elements`` (same page).

    Elements lying mostly (≥ 50 %) inside a table are dropped (they are its cells);
    each item goes where its first covered element was, else before the first element
    that starts below its top edge.
    """
    result = list(elements)
    for item in sorted(items, key=lambda e: _bbox(e)[1]):
        box = _bbox(item)
        covered = []
        if isinstance(item, Table):
            covered = [i for i, el in enumerate(result) if not isinstance(el, (Table, Image))
                       and (b := _bbox(el)) is not None and _inside(b, box) >= 0.5]
        if covered:
            pos = covered[0]
            for i in reversed(covered):
                del result[i]
        else:
            pos = next((i for i, el in enumerate(result)
                        if (b := _bbox(el)) is not None and b[1] >= box[1]), len(result))
        result.insert(pos, item)
    return result
