"""Generated workbooks whose formulas have no cached values (issue 24 kind 4): the
values are recalculated (LibreOffice in the converter sandbox), or at least the
formula text is indexed — never an empty cell."""
from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest

from stages.office import find_soffice
from stages.partition import partition_file
from stages.profiles import Profile
from stages.xlsx_formulas import bare_formulas, with_values


def _workbook(path: Path) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["Item", "Amount"])
    ws.append(["FORMULAROWMARKER widgets", 10])
    ws.append(["gadgets", 32])
    ws.append(["Total", "=SUM(B2:B3)"])
    second = wb.create_sheet("Rates")
    second.append(["Rate", 7])
    second.append(["Tripled", "=B1*3"])
    wb.save(path)
    return path


def _text(path: Path) -> str:
    return "\n".join(e["text"] for e in partition_file(path, "xlsx", Profile(name="default")))


@pytest.mark.skipif(find_soffice() is None, reason="LibreOffice not installed")
def test_formulas_without_cached_values_are_recalculated(tmp_path):
    book = _workbook(tmp_path / "generated.xlsx")
    assert bare_formulas(book) == 2
    text = _text(book)
    assert "FORMULAROWMARKER" in text and "42" in text and "21" in text


def test_without_libreoffice_the_formula_text_is_indexed(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSTREAM_SOFFICE", str(tmp_path / "no-such-soffice"))
    book = _workbook(tmp_path / "generated.xlsx")
    path, note = with_values(book, tmp_path / "out")
    assert "indexed as text" in note and bare_formulas(path) == 0
    text = _text(book)
    assert "=SUM(B2:B3)" in text and "FORMULAROWMARKER" in text


def test_workbook_with_cached_values_is_untouched(tmp_path):
    wb = openpyxl.Workbook()
    wb.active.append(["plain", 1])
    wb.save(tmp_path / "plain.xlsx")
    assert with_values(tmp_path / "plain.xlsx", tmp_path / "o") == (tmp_path / "plain.xlsx", "")
