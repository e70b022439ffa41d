"""Workbooks whose formulas carry no cached values: recalculated, never left blank.

A workbook written by a program (openpyxl, a report generator) stores each formula
(``<f>SUM(B2:B3)</f>``) without the value Excel would have cached (``<v>``), and
every reader that does not calculate (openpyxl ``data_only``, pandas, unstructured)
gives an empty cell: a total, a computed rate, a looked-up name are lost while the
document reports success.  :func:`with_values` counts such cells; when there are
any, LibreOffice recalculates the workbook in the converter sandbox (a round trip
XLSX → XLSX, :func:`stages.office.convert_cold`) and the copy with the values is
parsed instead.  If that fails (no LibreOffice, the sandbox unavailable, a
timeout), the formulas' own text (``=SUM(B2:B3)``) is written into those cells, so
at least the formula is indexed.  The returned note says which happened.
"""
from __future__ import annotations

import logging
import re
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)
_SHEET = re.compile(r"^xl/worksheets/[^/]+\.xml$")
#: a cell with a formula and an empty or missing cached value
_BARE_FORMULA = re.compile(rb"<c ([^>]*?)>\s*<f(?:\s[^>]*)?>([^<]*)</f>\s*(?:<v\s*/>|<v>\s*</v>)?\s*</c>")
RECALC_TIMEOUT_S = 120.0


def bare_formulas(path: Path) -> int:
    """Cells of the workbook at ``path`` holding a formula without a cached value."""
    with zipfile.ZipFile(path) as zf:
        return sum(len(_BARE_FORMULA.findall(zf.read(n))) for n in zf.namelist() if _SHEET.match(n))


def with_values(path: Path, out_dir: Path, timeout_s: float = RECALC_TIMEOUT_S) -> tuple[Path, str]:
    """``(workbook to parse, note)``: ``path`` and ``""`` when every formula has a
    cached value; else a recalculated copy (note ``"N formula(s) without cached
    values recalculated"``) or, when recalculation fails, a copy with the formulas'
    text in those cells (note says so and why)."""
    try:
        count = bare_formulas(path)
    except (zipfile.BadZipFile, OSError, KeyError):
        return path, ""
    if not count:
        return path, ""
    from stages.errors import DocumentError
    from stages.office import convert_cold

    try:
        recalculated = convert_cold(path, out_dir, "xlsx", timeout_s, target="xlsx")
        left = bare_formulas(recalculated)
        if left < count:
            return recalculated, f"{count} formula(s) without cached values recalculated"
        why = "LibreOffice left them without values"
    except DocumentError as exc:
        why = exc.reason
    log.warning("%s: %d formula(s) without cached values not recalculated (%s); indexing their text",
                path.name, count, why)
    return _formula_text(path, out_dir), f"{count} formula(s) without cached values indexed as text ({why})"


def _formula_text(path: Path, out_dir: Path) -> Path:
    from xml.sax.saxutils import escape

    def cell(m: re.Match) -> bytes:
        attrs = re.sub(rb'\s*t="[^"]*"', b"", m.group(1))
        text = escape("=" + m.group(2).decode("utf-8", "replace"))
        return b"<c " + attrs + b' t="inlineStr"><is><t>' + text.encode() + b"</t></is></c>"

    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / "formula-text.xlsx"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info)
            out.writestr(info, _BARE_FORMULA.sub(cell, data) if _SHEET.match(info.filename) else data)
    return dst
