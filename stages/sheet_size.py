"""Spreadsheet extent check, before any dense load.

unstructured's ``partition_xlsx`` reads each sheet into a dense pandas DataFrame of
(last row) × (last column) cells, so one value in A1 and one in XFD1048576 asks for
17 billion cells (~20 GB before the kernel kills the process).  :func:`check_xlsx`
streams every worksheet's XML (constant memory: elements are cleared as they are
read) and raises :class:`stages.errors.LimitExceeded` when a sheet's extent is over
``RAGSTREAM_MAX_SHEET_CELLS``, naming the sheet, its extent and the limit.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

from stages.errors import LimitExceeded
from stages.limits import limit

_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REF = re.compile(r"^([A-Za-z]{1,3})(\d+)$")


def _column(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + (ord(ch) - 64)
    return n


def _column_letters(n: int) -> str:
    out = ""
    while n:
        n, rem = divmod(n - 1, 26)
        out = chr(65 + rem) + out
    return out


def sheet_extent(xml_stream) -> tuple[int, int]:
    """``(last_row, last_column)`` (1-based) of the cells in one worksheet XML stream;
    ``(0, 0)`` for an empty sheet.  Cells without an ``r`` attribute count on from the
    previous cell, as Excel and openpyxl do."""
    from lxml import etree

    last_row = last_col = 0
    row = col = 0
    for _, el in etree.iterparse(xml_stream, events=("end",), tag=(f"{_NS}c", f"{_NS}row"),
                                 huge_tree=True, resolve_entities=False):
        if el.tag == f"{_NS}row":
            r = el.get("r")
            row = int(r) if r and r.isdigit() else row + 1
            col = 0
            el.clear()
            continue
        ref = _REF.match(el.get("r") or "")
        if ref:
            col, row = _column(ref.group(1)), int(ref.group(2))
        else:
            col += 1
        if el.find(f"{_NS}v") is not None or el.find(f"{_NS}is") is not None or el.find(f"{_NS}f") is not None:
            last_row, last_col = max(last_row, row), max(last_col, col)
        el.clear()
    return last_row, last_col


def check_xlsx(path: Path) -> None:
    """Raise LimitExceeded when some worksheet of the XLSX at ``path`` spans more than
    ``RAGSTREAM_MAX_SHEET_CELLS`` cells (last row × last column holding a value).
    A file that is not a readable zip is left to the parser (which reports it)."""
    cap = limit("max_sheet_cells")
    if not cap:
        return
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        return
    with zf:
        sheets = sorted(n for n in zf.namelist()
                        if n.startswith("xl/worksheets/") and n.endswith(".xml"))
        for name in sheets:
            with zf.open(name) as stream:
                rows, cols = sheet_extent(stream)
            cells = rows * cols
            if cells > cap:
                raise LimitExceeded(
                    f"sheet too large: {name.rsplit('/', 1)[-1][:-4]} spans A1:{_column_letters(cols)}{rows} "
                    f"= {rows:,} rows × {cols:,} columns = {cells:,} cells, limit {cap:,} "
                    "(RAGSTREAM_MAX_SHEET_CELLS)")


def check_delimited(path: Path, delimiter: str = ",") -> None:
    """Raise LimitExceeded when a CSV/TSV at ``path`` (UTF-8) spans more than
    ``RAGSTREAM_MAX_SHEET_CELLS`` cells (rows × widest row), or one of its fields holds
    more than ``RAGSTREAM_MAX_FIELD_CHARS`` characters; read as a stream before the
    dense DataFrame load.

    Python's ``csv`` module refuses fields over 131,072 characters by default (a valid
    file with one long quoted field failed as "the CSV parser failed"); the reader here
    accepts up to the field limit instead and restores the process's setting after.
    Other ``csv.Error`` s propagate (the caller reports them as a parse failure).
    """
    import csv
    import sys

    cap, field_cap = limit("max_sheet_cells"), limit("max_field_chars")
    rows = cols = 0
    label = path.suffix[1:].upper() or "CSV"
    previous = csv.field_size_limit(field_cap or sys.maxsize)  # 0: no limit, as for the others
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            for row in csv.reader(fh, delimiter=delimiter):
                rows, cols = rows + 1, max(cols, len(row))
                if cap and rows * cols > cap:
                    raise LimitExceeded(f"sheet too large: {label} spans at least "
                                        f"{rows:,} rows × {cols:,} columns = {rows * cols:,} cells, "
                                        f"limit {cap:,} (RAGSTREAM_MAX_SHEET_CELLS)")
    except csv.Error as exc:
        if "field larger than field limit" not in str(exc):
            raise
        raise LimitExceeded(f"{label} field too long: a field of row {rows + 1:,} holds over "
                            f"{field_cap:,} characters, limit {field_cap:,} "
                            "(RAGSTREAM_MAX_FIELD_CHARS)") from None
    finally:
        csv.field_size_limit(previous)
