"""Ruled-table recovery on page images (scans): grid from ruling lines, cells by OCR.

unstructured's ``ocr_only`` turns a scanned table into loose lines of text (and lost
rows, ../shared/DESIGN.md).  This module recovers the table structure from the image itself:

1. binarise the grayscale page (adaptive mean threshold, so tinted header cells
   keep their dark rules and text);
2. morphological opening with long thin kernels keeps horizontal and vertical
   strokes (``MIN_HLINE_IN`` / ``MIN_VLINE_IN`` inches long);
3. a stroke is a ruling line only when it meets at least two strokes of the other
   direction (character stems and underlines meet none), and the lines that meet
   form one table;
4. the x/y positions of a table's lines (clustered within ``CLUSTER_IN``) give a
   fine grid; two neighbouring grid cells belong to one (spanning) cell when the
   ruling line between them is missing over most (``BORDER_COVERAGE``) of their
   shared edge — so row/column spans come from the drawing itself;
5. each cell is cropped (rules whitened, a margin of its own background added) and
   all cells of a page are OCR'd by ONE tesseract process reading a list of images
   (``--psm 7`` for one-line cells, ``--psm 6`` for blocks), ``OMP_THREAD_LIMIT=1``.

Cell text joins the cell's lines with a space, except after a line that ends in "/"
(a line break typeset after a slash carries no space: "Incomplete/" + "Terminated").

Only tables with ruling lines around their cells are found; borderless tables stay
text.  Recovery never fails a page: callers catch and log exceptions.

Size: one pipeline (binarise → strokes → grid → cell OCR → HTML) whose steps share the
grid types and thresholds.
"""
from __future__ import annotations

import html
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stages.tesseract import tesseract_lang

log = logging.getLogger(__name__)

MIN_HLINE_IN = 0.25     # shortest horizontal rule kept (inches)
MIN_VLINE_IN = 0.12     # shortest vertical rule kept (a one-line row is ~0.2 in tall)
CLUSTER_IN = 0.04       # rules closer than this are one grid line (double rules, jitter)
TOUCH_IN = 0.03         # how far a rule may stop short of the one it meets
BORDER_COVERAGE = 0.5   # fraction of a shared edge a rule must cover to separate cells
MIN_INK_PX = 12         # fewer dark pixels than this (after removing rules): empty cell
MIN_FILLED = 4          # a table needs this many non-empty cells ...
MIN_FILLED_FRACTION = 0.5  # ... and this share of its cells non-empty (charts, frames: not tables)
OCR_TIMEOUT_S = 120.0


@dataclass
class GridCell:
    """One (possibly spanning) cell: grid position, pixel box, OCR'd text."""

    row: int
    col: int
    rowspan: int
    colspan: int
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in image pixels
    text: str = ""


@dataclass
class TableGrid:
    """A ruled table found on a page image.

    Attributes:
        box: ``(x0, y0, x1, y1)`` in image pixels.
        n_rows, n_cols: size of the fine grid (every ruling line splits it).
        cells: the merged cells, row-major by their top-left grid position.
    """

    box: tuple[int, int, int, int]
    n_rows: int
    n_cols: int
    cells: list[GridCell] = field(default_factory=list)

    def to_html(self) -> str:
        """``<table><tr><td rowspan=.. colspan=..>`` HTML (spans only where > 1)."""
        rows = []
        for r in range(self.n_rows):
            tds = []
            for cell in sorted((c for c in self.cells if c.row == r), key=lambda c: c.col):
                attrs = (f' rowspan="{cell.rowspan}"' if cell.rowspan > 1 else "") + \
                        (f' colspan="{cell.colspan}"' if cell.colspan > 1 else "")
                tds.append(f"<td{attrs}>{html.escape(cell.text)}</td>")
            rows.append("<tr>" + "".join(tds) + "</tr>")
        return "<table>" + "".join(rows) + "</table>"

    def to_rows(self) -> list[list[str]]:
        """The table as a full ``n_rows × n_cols`` grid: a spanning cell's text sits in its
        top-left position and the other positions it covers are empty strings."""
        grid = [["" for _ in range(self.n_cols)] for _ in range(self.n_rows)]
        for cell in self.cells:
            grid[cell.row][cell.col] = cell.text
        return grid

    @property
    def text(self) -> str:
        """The non-empty cell texts, row-major, joined by spaces."""
        return " ".join(c.text for c in sorted(self.cells, key=lambda c: (c.row, c.col)) if c.text)


def binarise(gray: np.ndarray, dpi: float) -> np.ndarray:
    import cv2

    block = max(15, int(dpi * 0.12)) | 1  # odd, a bit larger than a stroke is thick
    return cv2.adaptiveThreshold(gray, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY_INV, block, 15)


def find_strokes(bw: np.ndarray, length: int, horizontal: bool) -> tuple[np.ndarray, list[tuple[int, int, int, int, int]]]:
    """Opened mask and its components ``(label, x0, y0, x1, y1)`` (inclusive-exclusive)."""
    import cv2

    size = (length, 1) if horizontal else (1, length)
    mask = cv2.morphologyEx(bw, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, size))
    bridge = (max(3, length // 8), 1) if horizontal else (1, max(3, length // 8))
    mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_RECT, bridge))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    comps = [(i, int(s[0]), int(s[1]), int(s[0] + s[2]), int(s[1] + s[3])) for i, s in enumerate(stats) if i]
    return labels, comps


def _meets(h, v, tol: int) -> bool:
    """Horizontal component ``h`` and vertical ``v`` cross or touch (within ``tol`` px)."""
    _, hx0, hy0, hx1, hy1 = h
    _, vx0, vy0, vx1, vy1 = v
    return hx0 - tol <= vx1 and vx0 <= hx1 + tol and vy0 - tol <= hy1 and hy0 <= vy1 + tol


def _cluster(values: list[float], tol: float) -> list[int]:
    """Sorted positions, merged when closer than ``tol`` (mean of each run)."""
    out: list[list[float]] = []
    for v in sorted(values):
        if out and v - out[-1][-1] <= tol:
            out[-1].append(v)
        else:
            out.append([v])
    return [round(sum(run) / len(run)) for run in out]


def find_tables(gray: np.ndarray, dpi: float) -> list[TableGrid]:
    """Ruled tables on a grayscale page image (structure only; cell text empty).

    Args:
        gray: 2-D uint8 array (0 = black), the rendered page.
        dpi: its resolution in pixels per inch (sets every length threshold).
    Returns:
        one TableGrid per group of meeting ruling lines with at least 2×1 cells,
        top to bottom.
    """
    return _detect(gray, dpi)[0]


def _detect(gray: np.ndarray, dpi: float) -> tuple[list[TableGrid], np.ndarray]:
    """``find_tables`` plus the mask of the ruling lines it kept (bool, image-sized)."""
    bw = binarise(gray, dpi)
    hlab, hcomps = find_strokes(bw, max(10, int(MIN_HLINE_IN * dpi)), True)
    vlab, vcomps = find_strokes(bw, max(8, int(MIN_VLINE_IN * dpi)), False)
    tol = max(2, int(TOUCH_IN * dpi))
    # ruling lines meet at least two lines of the other direction
    vmeet = {v[0]: [h[0] for h in hcomps if _meets(h, v, tol)] for v in vcomps}
    vkeep = {v[0]: v for v in vcomps if len(vmeet[v[0]]) >= 2}
    hkeep = {}
    for h in hcomps:
        if sum(1 for vid, v in vkeep.items() if h[0] in vmeet[vid]) >= 2:
            hkeep[h[0]] = h
    # group meeting lines into tables (union-find over horizontal ids)
    parent = {hid: hid for hid in hkeep}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for vid in vkeep:
        hs = [h for h in vmeet[vid] if h in hkeep]
        for other in hs[1:]:
            parent[find(other)] = find(hs[0])
    groups: dict[int, list[int]] = {}
    for hid in hkeep:
        groups.setdefault(find(hid), []).append(hid)
    hmask = np.isin(hlab, list(hkeep)) if hkeep else np.zeros_like(bw, dtype=bool)
    vmask = np.isin(vlab, list(vkeep)) if vkeep else np.zeros_like(bw, dtype=bool)
    tables = []
    for hids in groups.values():
        hs = [hkeep[i] for i in hids]
        vs = [v for vid, v in vkeep.items() if any(h in hids for h in vmeet[vid])]
        grid = _grid(hs, vs, hmask, vmask, dpi)
        if grid is not None:
            tables.append(grid)
    return sorted(tables, key=lambda t: (t.box[1], t.box[0])), hmask | vmask


def _grid(hs, vs, hmask: np.ndarray, vmask: np.ndarray, dpi: float) -> TableGrid | None:
    """The merged-cell grid of one table's lines, or None when it has < 2 cells."""
    ctol = max(3, CLUSTER_IN * dpi)
    ys = _cluster([(h[2] + h[4] - 1) / 2 for h in hs], ctol)
    xs = _cluster([(v[1] + v[3] - 1) / 2 for v in vs], ctol)
    if len(ys) < 2 or len(xs) < 2 or (len(ys) - 1) * (len(xs) - 1) < 2:
        return None
    n_rows, n_cols = len(ys) - 1, len(xs) - 1
    band = max(2, int(ctol / 2) + 1)

    def covered(mask: np.ndarray, axis_pos: int, start: int, end: int, vertical: bool) -> bool:
        inset = max(1, (end - start) // 10)
        start, end = start + inset, end - inset
        if end <= start:
            return True
        if vertical:  # a vertical rule at x = axis_pos between rows start..end
            strip = mask[start:end, max(0, axis_pos - band):axis_pos + band + 1]
            hits = strip.any(axis=1)
        else:
            strip = mask[max(0, axis_pos - band):axis_pos + band + 1, start:end]
            hits = strip.any(axis=0)
        return hits.size > 0 and hits.mean() >= BORDER_COVERAGE

    parent = list(range(n_rows * n_cols))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r in range(n_rows):
        for c in range(n_cols):
            if c + 1 < n_cols and not covered(vmask, xs[c + 1], ys[r], ys[r + 1], True):
                parent[find(r * n_cols + c + 1)] = find(r * n_cols + c)
            if r + 1 < n_rows and not covered(hmask, ys[r + 1], xs[c], xs[c + 1], False):
                parent[find((r + 1) * n_cols + c)] = find(r * n_cols + c)
    spans: dict[int, list[int]] = {}
    for i in range(n_rows * n_cols):
        r, c = divmod(i, n_cols)
        s = spans.setdefault(find(i), [r, c, r, c])
        s[0], s[1], s[2], s[3] = min(s[0], r), min(s[1], c), max(s[2], r), max(s[3], c)
    cells, seen = [], set()
    for r0, c0, r1, c1 in sorted(spans.values()):
        if (r0, c0) in seen:  # a non-rectangular group overlapping another: keep the first
            continue
        seen.update((r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1))
        cells.append(GridCell(r0, c0, r1 - r0 + 1, c1 - c0 + 1, (xs[c0], ys[r0], xs[c1 + 1], ys[r1 + 1])))
    if len(cells) < 2:
        return None
    return TableGrid((xs[0], ys[0], xs[-1], ys[-1]), n_rows, n_cols, cells)


def _join_lines(lines: list[str]) -> str:
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        out += line if (not out or out.endswith("/")) else " " + line
    return re.sub(r"\s+", " ", out).strip()


def ocr_cells(gray: np.ndarray, tables: list[TableGrid], dpi: float,
              languages: list[str] | tuple[str, ...] = ("eng",),
              rules: np.ndarray | None = None) -> None:
    """Fill ``cell.text`` for every cell of ``tables`` (in place) with tesseract.

    ``rules`` is the ruling-line mask from detection (default: detected again); those
    pixels are painted with the cell's background before OCR.  Cells without ink
    stay empty and are not OCR'd.  All other cells are written as
    PNGs and read by one tesseract process per page-segmentation mode (7: one line,
    6: a block), single-threaded (``OMP_THREAD_LIMIT=1``).

    Raises:
        FileNotFoundError: tesseract is not on PATH.
        subprocess.CalledProcessError / TimeoutExpired: tesseract failed or took
            longer than ``OCR_TIMEOUT_S`` seconds.
    """
    import cv2

    binary = shutil.which("tesseract")
    if binary is None:
        raise FileNotFoundError("tesseract not installed")
    bw = binarise(gray, dpi)
    if rules is None:
        rules = _detect(gray, dpi)[1]
    lines_mask = cv2.dilate(rules.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    inset = max(2, int(TOUCH_IN * dpi / 2) + 1)
    pad = max(8, int(dpi * 0.06))
    by_psm: dict[int, list[tuple[GridCell, np.ndarray]]] = {6: [], 7: []}
    for table in tables:
        inked = []
        for cell in table.cells:
            x0, y0, x1, y1 = cell.box
            x0, y0, x1, y1 = x0 + inset, y0 + inset, x1 - inset, y1 - inset
            if x1 - x0 < 4 or y1 - y0 < 4:
                continue
            ink = (bw[y0:y1, x0:x1] > 0) & ~lines_mask[y0:y1, x0:x1]
            if int(np.count_nonzero(ink)) < MIN_INK_PX:
                continue
            crop = gray[y0:y1, x0:x1].copy()
            background = int(np.median(crop))
            crop[lines_mask[y0:y1, x0:x1]] = background
            crop = cv2.copyMakeBorder(crop, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=background)
            inked.append((7 if _text_lines(ink, dpi) <= 1 else 6, cell, crop))
        if not _table_like(len(inked), len(table.cells)):
            continue  # mostly empty boxes: a chart, a form frame, a page border
        for psm, cell, crop in inked:
            by_psm[psm].append((cell, crop))
    lang = tesseract_lang(languages)
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    with tempfile.TemporaryDirectory(prefix="ragstream-cells-") as tmp:
        for psm, items in by_psm.items():
            if not items:
                continue
            listing = Path(tmp) / f"cells-{psm}.txt"
            names = []
            for i, (_, crop) in enumerate(items):
                name = Path(tmp) / f"cell-{psm}-{i:04d}.png"
                cv2.imwrite(str(name), crop)
                names.append(str(name))
            listing.write_text("\n".join(names) + "\n")
            base = Path(tmp) / f"out-{psm}"
            subprocess.run([binary, str(listing), str(base), "-l", lang, "--psm", str(psm),
                            "-c", f"user_defined_dpi={int(dpi)}", "tsv"],
                           check=True, capture_output=True, timeout=OCR_TIMEOUT_S, env=env)
            texts = _read_tsv(base.with_suffix(".tsv"), len(items))
            for (cell, _), text in zip(items, texts):
                cell.text = text


def _text_lines(ink: np.ndarray, dpi: float) -> int:
    """Number of text lines in a cell: runs of inked rows separated by gaps."""
    rows = ink.any(axis=1)
    gap = max(2, int(dpi * 0.02))
    lines, run, blank = 0, False, gap
    for on in rows:
        if on:
            if not run and blank >= gap:
                lines += 1
            run, blank = True, 0
        else:
            run = False
            blank += 1
    return lines


def _read_tsv(path: Path, pages: int) -> list[str]:
    """tesseract TSV → text per input image (lines in reading order)."""
    lines: dict[tuple[int, int, int, int], list[str]] = {}
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines()[1:]:
        parts = raw.split("\t")
        if len(parts) < 12 or parts[0] != "5" or not parts[11].strip():
            continue
        page, block, par, line = (int(p) for p in parts[1:5])
        lines.setdefault((page, block, par, line), []).append(parts[11].strip())
    out = []
    for page in range(1, pages + 1):
        keys = sorted(k for k in lines if k[0] == page)
        out.append(_join_lines([" ".join(lines[k]) for k in keys]))
    return out


def recover_tables(image, dpi: float, languages: list[str] | tuple[str, ...] = ("eng",)) -> list[TableGrid]:
    """Find the ruled tables on a page image and OCR their cells.

    Args:
        image: a PIL image (any mode) or a path to one.
        dpi: the image's resolution in pixels per inch.
        languages: tesseract/ISO language codes, e.g. ``("eng",)``.
    Returns:
        TableGrids with cell text, top to bottom; grids with fewer than
        ``MIN_FILLED`` non-empty cells or under ``MIN_FILLED_FRACTION`` of their cells
        non-empty (charts, frames) are dropped.
    Raises:
        see ``ocr_cells``; image decoding errors from Pillow.
    """
    from PIL import Image as PILImage

    if not isinstance(image, PILImage.Image):
        image = PILImage.open(image)
    gray = np.asarray(image.convert("L"))
    tables, rules = _detect(gray, dpi)
    if tables:
        ocr_cells(gray, tables, dpi, languages, rules)
    return [t for t in tables if _table_like(sum(1 for c in t.cells if c.text), len(t.cells))]


def _table_like(filled: int, cells: int) -> bool:
    return filled >= MIN_FILLED and filled >= MIN_FILLED_FRACTION * cells


def table_elements(tables: list[TableGrid], width: int, height: int, **metadata) -> list:
    """unstructured ``Table`` elements for ``tables`` (pixel coordinates of a
    ``width × height`` image); ``metadata`` goes into ``ElementMetadata`` (e.g.
    ``page_number``, ``filename``, ``filetype``, ``languages``)."""
    from unstructured.documents.coordinates import PixelSpace
    from unstructured.documents.elements import CoordinatesMetadata, ElementMetadata, Table

    out = []
    for t in tables:
        x0, y0, x1, y1 = t.box
        coords = CoordinatesMetadata(points=((x0, y0), (x0, y1), (x1, y1), (x1, y0)),
                                     system=PixelSpace(width=width, height=height))
        out.append(Table(text=t.text, metadata=ElementMetadata(
            text_as_html=t.to_html(), coordinates=coords, **metadata)))
    return out
