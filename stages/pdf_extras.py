"""What unstructured's ``fast`` PDF strategy misses: page facts, tables, images.

``fast`` yields no Table elements (cells come out as loose Title/Text) and no
images (../shared/DESIGN.md).  ``scan_pages`` reads each page once with pypdfium2 — whether
it has a text layer, its sizeable images (rendered to PNG) — and, with pdfplumber on
pages that draw vector paths, its ruled tables (cells → HTML in the same
``<table><tr><td>`` shape unstructured uses for DOCX/HTML tables).
``merge_page_items`` then replaces the loose cell elements with Table elements and
inserts Image elements in reading position.  Table/image recovery never fails a
document: a page whose tables cannot be read keeps its text elements.
"""
from __future__ import annotations

import base64
import html
import io
import logging
from dataclasses import dataclass, field
from pathlib import Path

from unstructured.documents.coordinates import PixelSpace
from unstructured.documents.elements import (CoordinatesMetadata, Element, ElementMetadata,
                                             Image, Table)

from stages.geometry import element_bbox, fraction_inside

MIN_IMAGE_PT = 40          # ignore images smaller than this on either side (icons, rules)
MIN_IMAGE_AREA = 0.01      # ... or under 1 % of the page
SCAN_AREA = 0.85           # an image this large on a page with text is a scan background
IMAGE_DPI = 110
MIN_TABLE_PATHS = 1        # no vector paths at all: no ruled table (one path can draw a grid)
MIN_TABLE_CELLS = 6        # smaller grids are usually partial detections of rule-only tables
MAX_MEAN_CELL_CHARS = 120  # longer average cell text means boxed prose, not data
IMAGE_MAX_PX = 1024


log = logging.getLogger(__name__)


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

    pypdfium2 (C, ~10x faster than pdfminer) counts text-layer characters, finds image
    boxes (through nested form XObjects) and counts vector paths; pdfplumber only
    looks for ruled tables on pages that have text and enough paths to draw a grid.
    Returns one PageScan per page, with Table/Image elements when asked.  Raises
    whatever pypdfium2/pdfplumber raise on unreadable files.
    """
    import pypdfium2

    scans = []
    plumber = None
    pdf = pypdfium2.PdfDocument(str(path))
    try:
        for number in range(first, last + 1):
            page = pdf[number - 1]
            try:
                scan, boxes, paths = _scan_page(page, number)
                meta = dict(filename=filename, page_number=number, filetype="application/pdf",
                            languages=languages)
                if tables and scan.text_chars and paths >= MIN_TABLE_PATHS:
                    if plumber is None:
                        import pdfplumber

                        plumber = pdfplumber.open(path)
                    ppage = plumber.pages[number - 1]
                    try:
                        visible = ppage.crop(ppage.bbox)  # not what is drawn off the page (stages.offpage_text)
                        scan.items += _tables(visible, scan, meta)
                        scan.items += _rule_tables(visible, page, scan, meta)
                    except Exception as exc:  # noqa: BLE001 - tables are a bonus, text is not
                        log.warning("table recovery failed on page %d of %s: %s", number, path, exc)
                    finally:
                        ppage.close()
                if images and scan.text_chars and boxes:
                    scan.items += _images(page, boxes, scan, meta)
            finally:
                page.close()
            scans.append(scan)
    finally:
        pdf.close()
        if plumber is not None:
            plumber.close()
    return scans


def _scan_page(page, number: int) -> tuple[PageScan, list[tuple[float, float, float, float]], int]:
    """(PageScan without items, image boxes in top-left page points, path count)."""
    import pypdfium2.raw as pdfium_c

    left, bottom, right, top = page.get_mediabox()
    textpage = page.get_textpage()
    try:
        chars = sum(1 for ch in textpage.get_text_bounded() if not ch.isspace())
    finally:
        textpage.close()
    boxes, paths, image_count = [], 0, 0
    for obj in page.get_objects(max_depth=8):
        if obj.type == pdfium_c.FPDF_PAGEOBJ_PATH:
            paths += 1
        elif obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE:
            image_count += 1
            x0, y0, x1, y1 = obj.get_bounds()
            container = obj.container
            while container is not None:  # nested in form XObjects: map to page space
                x0, y0, x1, y1 = container.get_matrix().on_rect(x0, y0, x1, y1)
                container = container.container
            boxes.append((x0 - left, top - y1, x1 - left, top - y0))
    if page.get_rotation() % 360:
        boxes = []  # rotated page: box and render coordinates differ; keep the text only
    scan = PageScan(number, right - left, top - bottom, chars, image_count)
    return scan, boxes, paths


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
        filled = [c for c in cells if c]
        if len(rows) < 2 or ncols < 2 or len(filled) < MIN_TABLE_CELLS or len(filled) < 0.5 * len(cells):
            continue  # a framed text box, a partial grid or a decoration, not a data table
        if sum(map(len, filled)) / len(filled) > MAX_MEAN_CELL_CHARS:
            continue  # prose in boxes (a framed layout), better left to the text elements
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        text = " ".join(c for c in cells if c)
        out.append(Table(text=text, metadata=ElementMetadata(
            text_as_html=f"<table>{body}</table>", coordinates=_coords(table.bbox, scan), **meta)))
    return out


def _rule_tables(ppage, page, scan: PageScan, meta: dict) -> list[Element]:
    """Tables drawn with horizontal rules only (``stages.rule_tables``), outside the
    ruled grids already in ``scan.items``; [] on any error."""
    from stages.rule_tables import pdf_page_tables

    try:
        return pdf_page_tables(ppage, page, scan.width, scan.height, meta,
                               existing=[element_bbox(i) for i in scan.items if isinstance(i, Table)])
    except Exception as exc:  # noqa: BLE001 - tables are a bonus, text is not
        log.warning("rule-table recovery failed on page %d: %s", scan.number, exc)
        return []


def _images(page, boxes, scan: PageScan, meta: dict) -> list[Element]:
    """Render the page once, crop each sizeable image box into a PNG Image element."""
    out, rendered = [], None
    page_area = scan.width * scan.height
    crop_left, _, _, crop_top = page.get_cropbox()
    media_left, _, _, media_top = page.get_mediabox()
    scale = IMAGE_DPI / 72
    for box in boxes:
        x0, top = max(box[0], 0.0), max(box[1], 0.0)
        x1, bottom = min(box[2], scan.width), min(box[3], scan.height)
        w, h = x1 - x0, bottom - top
        if w < MIN_IMAGE_PT or h < MIN_IMAGE_PT or w * h < MIN_IMAGE_AREA * page_area \
                or w * h > SCAN_AREA * page_area:
            continue
        try:
            if rendered is None:
                rendered = page.render(scale=scale).to_pil()
            dx, dy = media_left - crop_left, crop_top - media_top  # media → crop box offsets
            pil = rendered.crop((round((x0 + dx) * scale), round((top + dy) * scale),
                                 round((x1 + dx) * scale), round((bottom + dy) * scale)))
        except Exception:  # a bad colour space etc. must not fail the document
            continue
        if pil.width < 2 or pil.height < 2:
            continue
        pil.thumbnail((IMAGE_MAX_PX, IMAGE_MAX_PX))
        buf = io.BytesIO()
        pil.convert("RGB").save(buf, format="PNG", optimize=True)
        out.append(Image(text="", metadata=ElementMetadata(
            image_base64=base64.b64encode(buf.getvalue()).decode("ascii"), image_mime_type="image/png",
            coordinates=_coords((x0, top, x1, bottom), scan), **meta)))
    return out


def merge_page_items(elements: list[Element], items: list[Element]) -> list[Element]:
    """Merge one page's Table/Image ``items`` into its ``elements`` (same page).

    Elements lying mostly (≥ 50 %) inside a table are dropped (they are its cells);
    each item goes where its first covered element was, else before the first element
    that starts below its top edge.
    """
    result = list(elements)
    for item in sorted(items, key=lambda e: element_bbox(e)[1]):
        box = element_bbox(item)
        covered = []
        if isinstance(item, Table):
            covered = [i for i, el in enumerate(result) if not isinstance(el, (Table, Image))
                       and (b := element_bbox(el)) is not None and fraction_inside(b, box) >= 0.5]
        if covered:
            pos = covered[0]
            for i in reversed(covered):
                del result[i]
        else:
            pos = next((i for i, el in enumerate(result)
                        if (b := element_bbox(el)) is not None and b[1] >= box[1]), len(result))
        result.insert(pos, item)
    return result
