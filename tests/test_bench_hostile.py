"""``ragstream bench hostile`` expectations: outcome codes, and the markers and
forbidden words a completed case's indexed text is checked for."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.hostile import Expectation, case_files, load_expected, text_verdict, verdict

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT.parent / "shared" / "cases"


def test_expectations_parse_both_forms(tmp_path):
    (tmp_path / "expected.json").write_text(json.dumps({
        "a.pdf": "completed", "b.png": "limit_exceeded",
        "c.docx": {"outcome": "completed", "markers": ["M1"], "forbidden": ["SECRET"]}}))
    got = load_expected(tmp_path)
    assert got["a.pdf"] == Expectation("completed")
    assert got["c.docx"] == Expectation("completed", ("M1",), ("SECRET",))
    (tmp_path / "expected.json").write_text(json.dumps({"x": {"markers": []}}))
    with pytest.raises(ValueError):
        load_expected(tmp_path)


def test_text_verdict_names_what_is_missing_and_what_leaked():
    exp = Expectation("completed", ("M1", "M2"), ("SECRET",))
    assert text_verdict("M1 and M2", exp) == ""
    assert text_verdict("M1 SECRET", exp) == "missing M2; forbidden SECRET"
    assert text_verdict("anything", None) == ""
    assert verdict("COMPLETED", None, 3, "completed") and not verdict("COMPLETED", None, 0, "completed")


@pytest.mark.skipif(not CASES.exists(), reason="../shared/cases not present")
def test_every_shared_case_has_an_expectation():
    expected = load_expected(CASES, ROOT / "bench" / "hostile_expected.json")
    names = {p.name for p in case_files(CASES)}
    assert names <= set(expected), sorted(names - set(expected))
