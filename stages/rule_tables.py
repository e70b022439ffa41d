"""Tables without a full ruled grid: horizontal rules only (booktabs) or no rules.

pdfplumber (born-digital pages) and ``stages.table_ocr`` (scans) need ruling lines
around every cell; a table drawn with a few horizontal rules comes out as loose text.
This module recovers such tables from word positions:

1. a page *looks tabular* when it has at least ``MIN_RULES`` long horizontal rules
   (``MIN_RULE_FRACTION`` of the page width) of about the same extent — only those
   pages pay for the layout model, so ``auto`` stays fast on ordinary pages;
2. candidate regions are the layout model's Table regions (``stages.layout_model``),
   widened to the rules near them and cut at the last rule when there are ≥ 3 (top,
   header, bottom: below the bottom rule come notes); without the layout model, a
   group of ≥ 3 rules is a region, but must give ≥ 3 columns;
3. words inside a region (pdfplumber words / tesseract TSV word boxes) become lines
   by vertical overlap, each line splits into segments at gaps wider than
   ``COL_GAP`` × the text height (and at vertical rules), and columns are the x
   intervals that the segments of all lines cover (a gap shared by every line
   separates two columns);
4. lines merge into rows: all lines above the first inner rule form the header row,
   a line whose first cell is empty continues the row above (multi-line cells).

A region gives a Table only with ≥ 2 rows and ≥ 2 columns, at least
``MIN_FILLED_FRACTION`` of its cells filled, short cells (not prose) and not a
column of bullets beside one of text (a list).  On scans the region is OCR'd again
(tesseract TSV, ``--psm 6``, upscaled below ``UPSCALE_BELOW_DPI``) for word boxes,
and ``keep_text_outside`` keeps a caption that unstructured OCR'd into the same
block as the table.  Recovery never fails a page: the callers catch and log
exceptions.  Tables without any rule are not looked for (the page gate needs rules).

Size: one algorithm (rules → regions → columns → rows → cells) for born-digital and
scanned pages; its steps share thresholds and word/region types, and split they would
be read across files.
"""
from __future__ import annotations

import html
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MIN_RULE_FRACTION = 0.3    # a table rule spans this share of the page width
MIN_COLUMN_LINES = 2       # lines of ≥ 3 cells near the rules before the layout model runs
MIN_RULES = 2              # rules of one extent on a page before the layout model runs
EDGE = 0.02                # strokes this close to the page edge (share of its size) are borders
SAME_EXTENT = 0.1          # rules of one table start/end within this share of the page width
COL_GAP = 0.8              # a gap wider than this × text height separates cells
SPACE_GAP = 0.2            # words closer than this × height are joined without a space
SPANNING = 0.6             # a one-segment line wider than this share of the region spans columns
MIN_FILLED_FRACTION = 0.4
MAX_MEAN_CELL_CHARS = 60
LAYOUT_DPI = 100           # page render for the layout model (it resizes to 800×608 anyway)
OCR_TIMEOUT_S = 60.0
UPSCALE_BELOW_DPI = 300    # scans below this are OCR'd at twice their size


@dataclass
class Word:
    """One word with its box (any unit, y downwards)."""

    x0: float
    top: float
    x1: float
    bottom: float
    text: str

    @property
    def height(self) -> float:
        return self.bottom - self.top


Box = tuple[float, float, float, float]
_MINUS = re.compile(r"^[\u2014\u2013\u2212-] ?(\d)")  # OCR reads "−0.83" as "— 0.83"
Rule = tuple[float, float, float]  # x0, y, x1


# ---------------------------------------------------------------- rules and regions

def long_rules(segments: list[tuple[float, float, float]], page_width: float, tol: float,
               page_height: float | None = None) -> list[Rule]:
    """Horizontal rules at least ``MIN_RULE_FRACTION`` of ``page_width`` long.

    ``segments`` are ``(x0, y, x1)`` horizontal strokes; strokes on one y (within
    ``tol``) that touch are joined, double strokes (within ``tol``) count once.  With
    ``page_height``, page borders (edges of a page-sized background rectangle, rules
    at the very top/bottom or across the whole width) are not rules.
    """
    if page_height:
        segments = [(x0, y, x1) for x0, y, x1 in segments
                    if EDGE * page_height < y < (1 - EDGE) * page_height and x1 - x0 < (1 - EDGE) * page_width]
    out: list[list[float]] = []
    for x0, y, x1 in sorted(segments, key=lambda s: (s[1], s[0])):
        for r in out:
            if abs(r[1] - y) <= tol and x0 <= r[2] + tol and x1 >= r[0] - tol:
                r[0], r[2] = min(r[0], x0), max(r[2], x1)
                break
        else:
            out.append([x0, y, x1])
    rules = [(r[0], r[1], r[2]) for r in out if r[2] - r[0] >= MIN_RULE_FRACTION * page_width]
    return sorted(rules, key=lambda r: r[1])


def rule_groups(rules: list[Rule], page_width: float) -> list[list[Rule]]:
    """Rules of about the same x extent (a table's top, header and bottom rules), top to
    bottom; groups of one rule are dropped."""
    groups: list[list[Rule]] = []
    tol = SAME_EXTENT * page_width
    for rule in rules:
        for g in groups:
            if abs(g[0][0] - rule[0]) <= tol and abs(g[0][2] - rule[2]) <= tol:
                g.append(rule)
                break
        else:
            groups.append([rule])
    return [g for g in groups if len(g) >= MIN_RULES]


def looks_tabular(rules: list[Rule], page_width: float, words: list[Word] | None = None,
                  page_height: float | None = None) -> bool:
    """True when ``rules`` hold at least ``MIN_RULES`` long rules of one extent and, with
    ``words`` (the page's words), at least ``MIN_COLUMN_LINES`` text lines from the
    group's first rule to a little below its last rule split into ≥ 3 cells by wide
    gaps (aligned word columns, not a letterhead or a boxed paragraph)."""
    groups = rule_groups(rules, page_width)
    if not groups or words is None:
        return bool(groups)
    extra = 0.25 * (page_height or 0)
    for g in groups:
        band = [w for w in words if g[0][1] <= (w.top + w.bottom) / 2 <= g[-1][1] + extra]
        if not band:
            continue
        heights = sorted(w.height for w in band)
        height = heights[int(0.75 * (len(heights) - 1))]
        split = sum(1 for line in _lines(band) if len(_segments(line, height, [])) >= 3)
        if split >= MIN_COLUMN_LINES:
            return True
    return False


def regions(rules: list[Rule], page_width: float, layout: list[Box] | None,
            tol: float) -> list[tuple[Box, list[float], bool]]:
    """Candidate table regions: ``(box, rule y positions inside, found by the layout model)``.

    ``layout``: the layout model's Table boxes (same units), or None when the model is
    unavailable: then groups of ≥ 3 rules are the candidates (the caller asks more of
    them: ≥ 3 columns).
    """
    out: list[tuple[Box, list[float], bool]] = []
    margin = 5 * tol
    for x0, y0, x1, y1 in layout or []:
        near = [r for r in rules if y0 - margin <= r[1] <= y1 + margin
                and min(x1, r[2]) - max(x0, r[0]) >= 0.5 * (x1 - x0)]
        if near:
            x0, x1 = min(x0, min(r[0] for r in near)), max(x1, max(r[2] for r in near))
            y0 = min(y0, near[0][1])
            if len(near) >= 3 and y1 > near[-1][1]:
                y1 = near[-1][1]  # the bottom rule closes the table; below it: notes, text
            else:
                y1 = max(y1, near[-1][1])
        inside = [r[1] for r in rules if y0 - tol <= r[1] <= y1 + tol
                  and min(x1, r[2]) - max(x0, r[0]) >= 0.5 * (x1 - x0)]
        out.append(((x0, y0, x1, y1), inside, True))
    if layout is not None:
        return out
    for g in rule_groups(rules, page_width):
        if len(g) >= 3:
            box = (min(r[0] for r in g), g[0][1], max(r[2] for r in g), g[-1][1])
            out.append((box, [r[1] for r in g], False))
    return out


# ---------------------------------------------------------------- rows and columns

def _lines(words: list[Word]) -> list[list[Word]]:
    """Words grouped into text lines by vertical overlap (half the smaller height)."""
    lines: list[list[Word]] = []
    spans: list[list[float]] = []
    for w in sorted(words, key=lambda w: ((w.top + w.bottom) / 2, w.x0)):
        for line, span in zip(lines, spans):
            overlap = min(span[1], w.bottom) - max(span[0], w.top)
            if overlap >= 0.5 * min(span[1] - span[0], w.height):
                line.append(w)
                if w.height >= 0.7 * (span[1] - span[0]):  # superscripts do not stretch a line
                    span[0], span[1] = min(span[0], w.top), max(span[1], w.bottom)
                break
        else:
            lines.append([w])
            spans.append([w.top, w.bottom])
    for line in lines:
        line.sort(key=lambda w: w.x0)
    order = sorted(range(len(lines)), key=lambda i: spans[i][0])
    return [lines[i] for i in order]


def _join(words: list[Word], height: float) -> str:
    out, prev = "", None
    for w in words:
        if prev is not None and w.x0 - prev.x1 > SPACE_GAP * height:
            out += " "
        out += w.text
        prev = w
    return out.strip()


def _segments(line: list[Word], height: float, splits: list[float]) -> list[list[Word]]:
    segs: list[list[Word]] = []
    for w in line:
        if segs:
            prev = segs[-1][-1]
            split = any(prev.x1 - 1 <= s <= w.x0 + 1 for s in splits)
            if not split and w.x0 - prev.x1 <= COL_GAP * height:
                segs[-1].append(w)
                continue
        segs.append([w])
    return segs


def build_rows(words: list[Word], box: Box, rule_ys: list[float] = (), splits: list[float] = (),
               min_cols: int = 2) -> list[list[str]] | None:
    """Rows of cell texts for the words of one table region, or None when they do not
    form a table (see the module docstring for the steps and the checks).

    Args:
        words: the words inside ``box``.
        box: the region ``(x0, y0, x1, y1)``.
        rule_ys: y positions of the horizontal rules in the region.
        splits: x positions of vertical rules (always separate cells).
        min_cols: fewest columns accepted.
    """
    words = [w for w in words if w.text.strip() and w.x1 > w.x0 and w.bottom > w.top]
    if len(words) < 4:
        return None
    heights = sorted(w.height for w in words)
    height = heights[int(0.75 * (len(heights) - 1))]
    lines = _lines(words)
    segs = [_segments(line, height, list(splits)) for line in lines]
    width = box[2] - box[0]

    def extent(seg):
        return seg[0].x0, max(w.x1 for w in seg)

    spanning = [len(s) == 1 and extent(s[0])[1] - extent(s[0])[0] > SPANNING * width for s in segs]
    intervals = sorted(extent(seg) for s, span in zip(segs, spanning) if not span for seg in s)
    cols: list[list[float]] = []
    for a, b in intervals:
        if cols and a <= cols[-1][1]:
            cols[-1][1] = max(cols[-1][1], b)
        else:
            cols.append([a, b])
    if len(cols) < min_cols:
        return None

    def col_of(x0: float) -> int:
        for i, (a, b) in enumerate(cols):
            if x0 <= b:
                return i
        return len(cols) - 1

    grid = []
    for line, s in zip(lines, segs):
        row = [[] for _ in cols]
        for seg in s:
            row[col_of(seg[0].x0)] += seg
        grid.append((line, [_join(cell, height) for cell in row]))
    mids = [(ln[0].top + ln[0].bottom) / 2 for ln, _ in grid]
    ys = sorted(rule_ys)
    gaps = [(a, b) for a, b in zip(ys, ys[1:]) if b - a > height]
    if sum(1 for a, b in gaps if not any(a < m < b for m in mids)) >= 2:
        return None  # rules with no text between them: chart gridlines, not table rules
    # header: every line above the first rule that has lines on both sides
    inner = [y for y in sorted(rule_ys) if any(m < y for m in mids) and any(m > y for m in mids)]
    rows: list[list[str]] = []
    header_end = 0
    if inner:
        header_end = sum(1 for m in mids if m < inner[0])
        below = len(grid) - header_end
        if header_end > 1 and below >= 2:
            rows.append([" ".join(g[1][c] for g in grid[:header_end] if g[1][c]) for c in range(len(cols))])
        else:
            header_end = 0
    for i, (_, cells) in enumerate(grid[header_end:]):
        if i and not cells[0] and rows[-1][0]:  # empty leading cell: the row above continues
            rows[-1] = [" ".join(x for x in (a, b) if x) for a, b in zip(rows[-1], cells)]
        else:
            rows.append(list(cells))
    for c in range(len(cols)):  # a column of bullets only: a list, not a table
        marks = [r[c] for r in rows if r[c]]
        if marks and all(not any(ch.isalnum() for ch in m) for m in marks) and len(cols) - 1 < min_cols:
            return None
    filled = [c for r in rows for c in r if c]
    if len(rows) < 2 or len(filled) < MIN_FILLED_FRACTION * len(rows) * len(cols):
        return None
    if sum(map(len, filled)) / len(filled) > MAX_MEAN_CELL_CHARS:
        return None
    return rows


def to_html(rows: list[list[str]]) -> str:
    """``<table><tr><td>`` HTML of ``rows`` (cell text escaped)."""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table>{body}</table>"


def _element(rows: list[list[str]], box: Box, width: float, height: float, meta: dict):
    from unstructured.documents.coordinates import PixelSpace
    from unstructured.documents.elements import CoordinatesMetadata, ElementMetadata, Table

    x0, y0, x1, y1 = box
    coords = CoordinatesMetadata(points=((x0, y0), (x0, y1), (x1, y1), (x1, y0)),
                                 system=PixelSpace(width=width, height=height))
    return Table(text=" ".join(c for r in rows for c in r if c),
                 metadata=ElementMetadata(text_as_html=to_html(rows), coordinates=coords, **meta))


def _overlaps(box: Box, others: list[Box]) -> bool:
    for o in others:
        ix = max(0.0, min(box[2], o[2]) - max(box[0], o[0]))
        iy = max(0.0, min(box[3], o[3]) - max(box[1], o[1]))
        area = max(1e-6, min((box[2] - box[0]) * (box[3] - box[1]), (o[2] - o[0]) * (o[3] - o[1])))
        if ix * iy >= 0.3 * area:
            return True
    return False


def _layout_boxes(image, scale: float) -> list[Box] | None:
    """Layout-model Table boxes divided by ``scale`` (image px per unit), None without the model."""
    from stages import layout_model

    try:
        found = layout_model.table_boxes(image)
    except layout_model.LayoutModelUnavailable:
        return None
    return [tuple(v / scale for v in b) for b in found]


# ---------------------------------------------------------------- born-digital pages

def pdf_page_tables(ppage, pdfium_page, width: float, height: float, meta: dict,
                    existing: list[Box] = ()) -> list:
    """Table elements for the rule-only / borderless tables of one born-digital page.

    Args:
        ppage: the pdfplumber page; pdfium_page: the same pypdfium2 page (rendered for
            the layout model only when the page looks tabular).
        width, height: page size in points (the coordinate system of the result).
        meta: ElementMetadata fields (page_number, filename, ...).
        existing: boxes of tables already recovered (ruled grids), skipped.
    """
    tol = 2.0
    segments = [(e["x0"], (e["top"] + e["bottom"]) / 2, e["x1"]) for e in ppage.edges
                if e["orientation"] == "h"]
    rules = long_rules(segments, width, tol, height)
    rules = [r for r in rules if not any(b[0] - tol <= r[0] and r[2] <= b[2] + tol and b[1] - tol <= r[1] <= b[3] + tol
                                         for b in existing)]  # the rules of ruled grids already found
    if not rule_groups(rules, width):
        return []
    words = [Word(w["x0"], w["top"], w["x1"], w["bottom"], w["text"])
             for w in ppage.extract_words(x_tolerance=1.5, y_tolerance=2)]
    if not looks_tabular(rules, width, words, height):
        return []
    scale = LAYOUT_DPI / 72
    image = pdfium_page.render(scale=scale).to_pil()
    found = regions(rules, width, _layout_boxes(image, scale), tol)
    out = []
    for box, rule_ys, by_model in found:
        if _overlaps(box, list(existing)):
            continue
        x0, y0, x1, y1 = box
        crop = ppage.within_bbox((max(0, x0 - 1), max(0, y0 - 1), min(width, x1 + 1), min(height, y1 + 1)),
                                 relative=False, strict=False)
        inside = [w for w in words if x0 - 1 <= w.x0 and w.x1 <= x1 + 1 and y0 - 1 <= w.top and w.bottom <= y1 + 1]
        splits = sorted({round(e["x0"], 1) for e in crop.edges if e["orientation"] == "v"
                         and e["bottom"] - e["top"] >= 6})
        rows = build_rows(inside, box, rule_ys, splits, min_cols=2 if by_model else 3)
        if rows:
            out.append(_element(rows, box, width, height, meta))
    return out


# ---------------------------------------------------------------- scans

def _tesseract_words(gray, box: Box, dpi: float, lang: str, mask=None) -> list[Word]:
    """tesseract TSV word boxes of the ``box`` crop, in page pixels (rule pixels whitened)."""
    import cv2

    binary = shutil.which("tesseract")
    if binary is None:
        raise FileNotFoundError("tesseract not installed")
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    pad = 4
    x0, y0 = max(0, x0 - pad), max(0, y0 - pad)
    x1, y1 = min(gray.shape[1], x1 + pad), min(gray.shape[0], y1 + pad)
    crop = gray[y0:y1, x0:x1].copy()
    if mask is not None:
        crop[mask[y0:y1, x0:x1]] = 255
    zoom = 2 if dpi < UPSCALE_BELOW_DPI else 1  # measured: 200 dpi crops read "0" as "O", "2" as "pd"
    if zoom > 1:
        crop = cv2.resize(crop, None, fx=zoom, fy=zoom, interpolation=cv2.INTER_CUBIC)
    with tempfile.TemporaryDirectory(prefix="ragstream-rt-") as tmp:
        png = Path(tmp) / "region.png"
        cv2.imwrite(str(png), crop)
        res = subprocess.run([binary, str(png), "stdout", "-l", lang, "--psm", "6",
                              "-c", f"user_defined_dpi={int(dpi * zoom)}", "tsv"],
                             check=True, capture_output=True, timeout=OCR_TIMEOUT_S,
                             env=dict(os.environ, OMP_THREAD_LIMIT="1"))
    words = []
    for raw in res.stdout.decode("utf-8", "replace").splitlines()[1:]:
        p = raw.split("\t")
        if len(p) < 12 or p[0] != "5" or not p[11].strip():
            continue
        try:
            conf = float(p[10])
        except ValueError:
            conf = 0.0
        left, top, w, h = (int(v) / zoom for v in p[6:10])
        if conf < 10 and not any(ch.isalnum() or ch in "\u2014\u2013\u2212-" for ch in p[11]):
            continue  # rule remnants, specks
        words.append(Word(x0 + left, y0 + top, x0 + left + w, y0 + top + h, p[11].strip()))
    return words


def image_tables(image, dpi: float, languages, existing: list[Box] = (), **meta) -> list:
    """Table elements for the rule-only tables of a scanned page image (pixel coordinates).

    Args:
        image: a PIL image of the page; dpi: its resolution.
        languages: tesseract / ISO language codes.
        existing: pixel boxes of tables already recovered (ruled grids), skipped.
        meta: ElementMetadata fields (page_number, filename, filetype, languages).
    Raises:
        FileNotFoundError / subprocess errors from tesseract (callers catch them).
    """
    import numpy as np

    from stages.table_ocr import binarise, find_strokes
    from stages.tesseract import tesseract_lang

    gray = np.asarray(image.convert("L"))
    h, w = gray.shape
    bw = binarise(gray, dpi)
    labels, comps = find_strokes(bw, max(20, int(0.25 * w)), True)
    tol = max(2.0, 0.03 * dpi)
    rules = long_rules([(c[1], (c[2] + c[4]) / 2, c[3]) for c in comps], w, tol, h)
    rules = [r for r in rules if not any(b[0] - tol <= r[0] and r[2] <= b[2] + tol and b[1] - tol <= r[1] <= b[3] + tol
                                         for b in existing)]
    if not looks_tabular(rules, w):
        return []
    scale = LAYOUT_DPI / dpi
    small = image.convert("RGB").resize((max(1, int(w * scale)), max(1, int(h * scale))))
    found = regions(rules, w, _layout_boxes(small, scale), tol)
    mask = labels > 0
    lang = tesseract_lang(list(languages))
    out = []
    for box, rule_ys, by_model in found:
        if _overlaps(box, list(existing)):
            continue
        words = _tesseract_words(gray, box, dpi, lang, mask)
        words = [wd for wd in words if box[1] - tol <= (wd.top + wd.bottom) / 2 <= box[3] + tol]
        rows = build_rows(words, box, rule_ys, min_cols=2 if by_model else 3)
        if rows:
            rows = [[_MINUS.sub(r"-\1", c) for c in r] for r in rows]
            out.append(_element(rows, box, w, h, dict(meta, languages=list(languages))))
    return out


def keep_text_outside(elements: list, tables: list, image, dpi: float, languages) -> list:
    """OCR elements that a rule-only table would swallow but that stick out of it (a
    caption OCR'd into the same block as the table) are replaced by the part outside
    the table, OCR'd again (pixel coordinates); other elements are kept as they are.

    Args:
        elements: the page's OCR elements; tables: the Table elements of
            ``image_tables`` for the same page; image: the page (PIL), dpi: its resolution.
    """
    import copy

    import numpy as np
    from unstructured.documents.coordinates import PixelSpace
    from unstructured.documents.elements import CoordinatesMetadata, Image, Table

    from stages.geometry import element_bbox, fraction_inside
    from stages.tesseract import tesseract_lang

    boxes = [element_bbox(t) for t in tables]
    if not boxes:
        return elements
    gray = np.asarray(image.convert("L"))
    lang = tesseract_lang(list(languages))
    out = []
    for el in elements:
        b = element_bbox(el)
        table = next((t for t in boxes if b is not None and not isinstance(el, (Table, Image))
                      and fraction_inside(b, t) >= 0.5), None)
        if table is None:
            out.append(el)
            continue
        for y0, y1 in ((b[1], table[1]), (table[3], b[3])):
            if y1 - y0 < 0.12 * dpi:
                continue
            words = _tesseract_words(gray, (b[0], y0, b[2], y1 - 2), dpi, lang)
            text = " ".join(" ".join(w.text for w in line) for line in _lines(words)).strip()
            if not text:
                continue
            part = copy.deepcopy(el)
            part.text = text
            part.metadata.coordinates = CoordinatesMetadata(
                points=((b[0], y0), (b[0], y1), (b[2], y1), (b[2], y0)),
                system=PixelSpace(width=image.width, height=image.height))
            out.append(part)
        out.append(el)  # dropped by merge_page_items: it lies mostly inside the table
    return out
