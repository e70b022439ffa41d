"""A delimited file with a field longer than Python's csv default (131,072 characters)
is a valid file: its text comes out, the long field in bounded pieces (R7 of
../shared/cases failed "the CSV parser failed").  The field limit is a named limit of
``stages.limits`` (``RAGSTREAM_MAX_FIELD_CHARS``); a field over it fails naming it."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from stages.errors import LimitExceeded
from stages.limits import limit
from stages.partition import partition_file, split_long_elements
from stages.profiles import Profile
from stages.table_split import pack_table

DATA = Path(__file__).parent / "data" / "hostile"
PROFILE = Profile(name="default")
LONG = " ".join(f"sentence {i} of the long field ends here." for i in range(8000))  # ~330 K chars


def _text(elements: list[dict]) -> str:
    return "\n".join(e["text"] for e in elements)


def _bounded(elements: list[dict]) -> None:
    cap = limit("max_element_chars")
    assert max(len(e["text"]) for e in elements) <= cap


def test_handed_csv_with_a_170k_field():
    elements = partition_file(DATA / "R7-csv-300k-field.csv", "csv", PROFILE)
    text = _text(elements)
    assert "CSVFIELDMARKER" in text and "CSVTAILMARKER" in text
    assert text.count("clause w0 w1 ") == 2200  # every sentence of the long field, once
    _bounded(elements)


@pytest.mark.parametrize("filetype,delimiter", [("csv", ","), ("tsv", "\t")])
def test_long_field_in_a_second_column(tmp_path, filetype, delimiter):
    src = tmp_path / f"long.{filetype}"
    with open(src, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter=delimiter)
        writer.writerows([["id", "body", "note"], ["1", "HEADROWMARKER", "short"],
                          ["2", LONG, "LONGROWNOTEMARKER"], ["3", "TAILROWMARKER", "end"]])
    elements = partition_file(src, filetype, PROFILE)
    text = _text(elements)
    for marker in ("HEADROWMARKER", "LONGROWNOTEMARKER", "TAILROWMARKER",
                   "sentence 0 of", "sentence 7999 of"):
        assert marker in text
    assert text.count(" of the long field ends here.") == 8000
    _bounded(elements)


def test_check_delimited_restores_the_process_setting(tmp_path):
    from stages.sheet_size import check_delimited

    src = tmp_path / "long.csv"
    src.write_text(f'id,body\n1,"{LONG}"\n', encoding="utf-8")
    before = csv.field_size_limit(131_072)
    try:
        check_delimited(src)
        assert csv.field_size_limit() == 131_072
    finally:
        csv.field_size_limit(before)


def test_field_over_the_limit_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSTREAM_MAX_FIELD_CHARS", "100000")
    src = tmp_path / "long.csv"
    src.write_text(f'id,body\n1,short\n2,"{LONG}"\n', encoding="utf-8")
    with pytest.raises(LimitExceeded, match=r"CSV field too long: a field of row 3 .* limit 100,000 "
                                            r"\(RAGSTREAM_MAX_FIELD_CHARS\)"):
        partition_file(src, "csv", PROFILE)


def _table(rows: list[list[str]]) -> str:
    return "<table>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</table>"


def test_pack_table_rows_under_the_header_each_piece_bounded():
    rows = [["id", "name", "value"]] + [[str(i), f"name {i}", f"value {i}"] for i in range(500)]
    pieces = pack_table(_table(rows), "x" * 5000, 400)
    assert len(pieces) > 5 and all(len(p.text) <= 400 for p in pieces)
    assert all(p.html.startswith("<table><tr><td>id</td>") for p in pieces)  # the header in each
    body = [line for p in pieces for line in p.text.splitlines()[1:]]
    assert body == [f"{i} name {i} value {i}" for i in range(500)]  # every row once, in order


def test_pack_table_long_row_and_long_cell():
    rows = [["id", "title", "body"], ["1", "short", "fine"], ["2", "t" * 50, LONG[:3000]]]
    pieces = pack_table(_table(rows), "x" * 5000, 500)
    assert all(len(p.text) <= 500 for p in pieces)
    assert pieces[0].html and "fine" in pieces[0].text
    assert pieces[1].text == "id title\n2 " + "t" * 50  # the fitting cells of the long row
    plain = [p.text for p in pieces if p.html is None]
    assert plain[0].startswith("body: sentence 0 ")
    assert " ".join(plain).count("ends here.") == LONG[:3000].count("ends here.")


def test_short_tables_and_texts_are_untouched():
    d = {"type": "Table", "element_id": "t", "text": "a b", "metadata": {"text_as_html": "<table/>"}}
    assert split_long_elements([d], 20) == [d]
    long = {"type": "Table", "element_id": "t", "text": "x " * 30,
            "metadata": {"text_as_html": _table([["h"]] + [["x"]] * 30), "page_number": 2}}
    out = split_long_elements([long], 20)
    assert [e["element_id"] for e in out] == [f"t-{n}" for n in range(len(out))]
    assert all(len(e["text"]) <= 20 and e["metadata"]["page_number"] == 2 for e in out)
