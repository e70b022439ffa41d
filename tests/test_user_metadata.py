"""User metadata rules (schemas/user_metadata.py) and the filter expression builder
(search/metadata_filter.py): what is accepted, what is refused and why, and that
no client text reaches a Milvus expression except as an escaped literal."""
from __future__ import annotations

import math

import pytest

from schemas.user_metadata import MAX_BYTES, MAX_KEYS, InvalidMetadata, check_metadata, parse_metadata
from search.metadata_filter import matches, metadata_expr, parse_filter
from search.query import SearchFilters


def test_accepted_metadata_comes_back_as_given():
    meta = {"team": "ops", "year": 2024, "ratio": 0.5, "public": True, "published": "2024-05-01",
            "tags": ["pumps", "énergie"], "_private": "x", "empty": "", "none_listed": []}
    assert check_metadata(meta) == meta
    assert parse_metadata('{"team": "ops", "year": 2024}') == {"team": "ops", "year": 2024}


@pytest.mark.parametrize("bad, words", [
    ([], "must be a JSON object"),
    ({"a.b": 1}, "must match"),
    ({'a"]': 1}, "must match"),
    ({"1st": 1}, "must match"),
    ({"k" * 65: 1}, "must match"),
    ({"": 1}, "must match"),
    ({"k": None}, "null is not allowed"),
    ({"k": {"nested": 1}}, "dict is not allowed"),
    ({"k": [1, 2]}, "lists may hold strings only"),
    ({"k": ["a"] * 65}, "at most 64"),
    ({"k": "x" * 1025}, "at most 1024 characters"),
    ({"k": "line\nbreak"}, "control characters"),
    ({"k": "nul\x00"}, "control characters"),
    ({"k": "lone \ud800"}, "no lone surrogates"),
    ({"k": ["ok", "\udfff"]}, "no lone surrogates"),
    ({"k": 2 ** 53 + 1}, r"±2\*\*53"),
    ({"k": math.nan}, "finite"),
    ({"k": math.inf}, "finite"),
    ({f"k{i}": i for i in range(MAX_KEYS + 1)}, "keys; at most"),
    ({f"k{i}": "x" * 1000 for i in range(10)}, f"at most {MAX_BYTES}"),
])
def test_refused_metadata_names_the_rule(bad, words):
    with pytest.raises(InvalidMetadata, match=words):
        check_metadata(bad)


def test_unparsable_metadata_says_where():
    with pytest.raises(InvalidMetadata, match="not valid JSON"):
        parse_metadata('{"team": ')
    with pytest.raises(InvalidMetadata, match="longer than"):
        parse_metadata('"' + "x" * 40000 + '"')


def test_refusals_never_quote_a_value():
    secret = "s3cr3t-value-" + "z" * 2000
    with pytest.raises(InvalidMetadata) as exc:
        check_metadata({"k": secret})
    assert "s3cr3t" not in str(exc.value)


def test_equality_and_operators_become_milvus_expressions():
    assert metadata_expr({"team": "ops"}) == '(metadata["team"] == "ops")'
    assert metadata_expr({"year": {"$gte": 2020, "$lt": 2025}}) == \
        '(metadata["year"] >= 2020) and (metadata["year"] < 2025)'
    assert metadata_expr({"public": True}) == '(metadata["public"] == true)'
    assert metadata_expr({"ratio": {"$gt": 0.25}}) == '(metadata["ratio"] > 0.25)'
    assert metadata_expr({"team": {"$in": ["ops", "dev"]}}) == \
        '((metadata["team"] == "ops" or metadata["team"] == "dev"))'
    # $ne/$nin: Milvus narrows to "has the key"; matches() decides (types kept apart)
    assert metadata_expr({"team": {"$nin": ["ops"]}}) == '(exists metadata["team"])'
    assert metadata_expr({"team": {"$ne": "ops"}}) == '(exists metadata["team"])'
    assert metadata_expr({"tags": {"$contains": "pumps"}}) == '(json_contains(metadata["tags"], "pumps"))'
    assert metadata_expr({"tags": {"$contains_any": ["a", "b"]}}) == \
        '(json_contains_any(metadata["tags"], ["a", "b"]))'
    assert metadata_expr({"team": {"$exists": False}}) == '(not (exists metadata["team"]))'
    assert metadata_expr({"published": {"$gte": "2024-01-01"}}) == '(metadata["published"] >= "2024-01-01")'
    assert metadata_expr({}) == ""


def test_hostile_strings_stay_literals():
    expr = metadata_expr({"team": 'x" or project != "'})
    assert expr == '(metadata["team"] == "x\\" or project != \\"")'
    expr = metadata_expr({"team": "back\\slash\\"})
    assert expr == '(metadata["team"] == "back\\\\slash\\\\")'
    combined = SearchFilters(category="reports", metadata={"team": "ops"}).milvus_expr()
    assert combined == 'category == "reports" and (metadata["team"] == "ops")'


@pytest.mark.parametrize("bad, words", [
    ({"team": {"$regex": "o.*"}}, "unknown operator"),
    ({"team": {}}, "no operator"),
    ({'team"] == 1 or metadata["x': 1}, "must match"),
    ({"year": {"$gt": True}}, "compares numbers or strings"),
    ({"year": {"$gt": ["a"]}}, "compares numbers or strings"),
    ({"team": {"$in": []}}, "list of 1 to 64"),
    ({"team": {"$in": "ops"}}, "list of 1 to 64"),
    ({"tags": {"$contains": 3}}, "takes a string"),
    ({"tags": {"$contains_any": [1]}}, "list of strings"),
    ({"team": {"$exists": "yes"}}, "true or false"),
    ({"team": None}, "null is not allowed"),
    ({"team": "bad\nline"}, "control characters"),
    (["team"], "must be a JSON object"),
])
def test_bad_filters_are_refused(bad, words):
    with pytest.raises(InvalidMetadata, match=words):
        metadata_expr(bad)


def test_cli_filter_text_is_parsed_and_checked():
    assert parse_filter('{"team": "ops"}') == {"team": "ops"}
    with pytest.raises(InvalidMetadata, match="not valid JSON"):
        parse_filter("team=ops")
    with pytest.raises(InvalidMetadata, match="unknown operator"):
        parse_filter('{"team": {"$like": "o%"}}')


@pytest.mark.parametrize("meta, spec, holds", [
    ({"n": 1}, {"n": True}, False),
    ({"n": True}, {"n": 1}, False),
    ({"n": 1}, {"n": 1.0}, True),
    ({"f": 0}, {"f": {"$in": [False, "0"]}}, False),
    ({"f": 0}, {"f": {"$nin": [False]}}, True),
    ({"y": 2020}, {"y": {"$gte": "2019"}}, False),
    ({"y": "2020-01-01"}, {"y": {"$gte": "2019"}}, True),
    ({"t": ["a", "b"]}, {"t": {"$contains": "b"}}, True),
    ({"t": "ab"}, {"t": {"$contains": "a"}}, False),
    ({}, {"t": {"$ne": "x"}}, False),
    (None, {"t": {"$exists": False}}, True),
    ({"a": 1, "b": "x"}, {"a": {"$gt": 0, "$lt": 2}, "b": "x"}, True),
])
def test_the_exact_check_keeps_json_types_apart(meta, spec, holds):
    metadata_expr(spec)  # a valid filter
    assert matches(meta, spec) is holds


def test_refusals_never_quote_a_key():
    """An error answer echoes nothing that was sent (a newcomer saw the key quoted)."""
    for bad in ('team"] or true or metadata["x', "k" * 100):
        with pytest.raises(InvalidMetadata) as exc:
            check_metadata({bad: 1})
        assert bad[:10] not in str(exc.value) and "must match" in str(exc.value)
        with pytest.raises(InvalidMetadata) as exc:
            metadata_expr({bad: 1})
        assert bad[:10] not in str(exc.value)
