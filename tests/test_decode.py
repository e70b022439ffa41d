"""decode_event: every valid record round-trips, every kind of poison is an
UndecodableRecord with a specific reason (no stack needed)."""
from __future__ import annotations

import typing

import orjson
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from schemas import (
    SUPPORTED_SCHEMA_VERSION, Chunk, DeadLetter, StatusEvent, UndecodableRecord, UploadEvent,
    decode_event,
)
from schemas.decode import supported_schema_version
from topics import ALL

RECORD_TYPES = sorted({spec.value_type for spec in ALL} | {DeadLetter}, key=lambda t: t.__name__)


def upload(**over) -> UploadEvent:
    fields = dict(document_id="doc-1", version=2, action="upload", project="p", category="c",
                  filename="a.pdf", bucket="raw", key="raw/p/c/v2/doc-1.pdf", sha256="ab" * 32,
                  size=1234, callback_url=None, submitted_at=1.5)
    fields.update(over)
    return UploadEvent(**fields)


def upload_bytes(drop=(), **over) -> bytes:
    data = orjson.loads(upload().dumps())
    data.update(over)
    for name in drop:
        data.pop(name)
    return orjson.dumps(data)


def reason(value_type, raw) -> str:
    with pytest.raises(UndecodableRecord) as info:
        decode_event(value_type, raw)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == info.value.reason
    return info.value.reason


# --- poison, one kind at a time -------------------------------------------------------

@pytest.mark.parametrize("raw", [None, b""])
def test_empty_value(raw):
    assert reason(UploadEvent, raw) == "empty value"


@pytest.mark.parametrize("raw, detail", [
    (b"\xff\xfe\x00", "not valid UTF-8"),
    (b"{", "unexpected end of data"),
    (b"hello", "unexpected character"),
    (b'{"a": 1} trailing', "unexpected content after document"),
])
def test_not_json(raw, detail):
    r = reason(UploadEvent, raw)
    assert r.startswith("not JSON: ") and detail in r


@pytest.mark.parametrize("raw, got", [(b"[1, 2]", "list"), (b'"doc"', "str"), (b"3", "int"),
                                      (b"null", "null"), (b"true", "bool")])
def test_not_a_json_object(raw, got):
    assert reason(UploadEvent, raw) == f"not a JSON object (got {got})"


def test_missing_fields_are_named_in_declaration_order():
    assert reason(UploadEvent, upload_bytes(drop=("version", "document_id"))) == \
        "missing field(s) document_id, version"
    assert reason(UploadEvent, b"{}").startswith("missing field(s) document_id, version, action")


def test_fields_with_defaults_may_be_missing():
    rec = decode_event(UploadEvent, upload_bytes(drop=("callback_url", "submitted_at", "schema_version",
                                                       "content_type")))
    assert (rec.callback_url, rec.submitted_at, rec.schema_version) == (None, 0.0, 1)
    assert rec.content_type == "application/octet-stream"


@pytest.mark.parametrize("over, expected", [
    ({"version": "2"}, "field version: expected int, got str"),
    ({"version": 2.5}, "field version: expected int, got float"),
    ({"size": True}, "field size: expected int, got bool"),
    ({"project": None}, "field project: expected str, got null"),
    ({"project": ["p"]}, "field project: expected str, got list"),
    ({"callback_url": 5}, "field callback_url: expected str or null, got int"),
    ({"submitted_at": "now"}, "field submitted_at: expected float, got str"),
    ({"schema_version": "1"}, "field schema_version: expected int, got str"),
])
def test_wrong_types(over, expected):
    assert reason(UploadEvent, upload_bytes(**over)) == expected


def test_container_types_are_checked():
    chunk = orjson.loads(Chunk(chunk_id="d:1:0", document_id="d", version=1, index=0, total=1,
                               project="p", category="c", filename="f", text="t", page_number=1,
                               element_types=["Title"]).dumps())
    assert reason(Chunk, orjson.dumps({**chunk, "element_types": "Title"})) == \
        "field element_types: expected list, got str"
    dl = orjson.loads(DeadLetter(document_id="d", version=1, stage="s", source_topic="t", error="e",
                                 attempts=1, payload={}, at=0.0).dumps())
    assert reason(DeadLetter, orjson.dumps({**dl, "payload": []})) == "field payload: expected dict, got list"


def test_newer_schema_version_is_rejected_older_ones_are_not_versions():
    assert reason(UploadEvent, upload_bytes(schema_version=7)) == "schema_version 7 is newer than supported 1"
    assert reason(UploadEvent, upload_bytes(schema_version=0)) == \
        "schema_version 0 is not a version (must be >= 1)"


def test_json_integers_are_accepted_as_floats():
    rec = decode_event(UploadEvent, upload_bytes(submitted_at=5))
    assert rec.submitted_at == 5.0 and type(rec.submitted_at) is float


def test_unknown_fields_are_ignored_for_forward_compatibility():
    rec = decode_event(UploadEvent, upload_bytes(priority="high", labels=["x"]))
    assert rec == upload()
    assert not hasattr(rec, "priority")
    assert "priority" not in orjson.loads(rec.dumps())


def test_faust_type_tag_cannot_pick_another_class():
    """A value tagged as another record (Faust's ``__faust.ns``) is checked against the
    expected type: Faust's own loads would instantiate the tagged class."""
    raw = upload_bytes(__faust={"ns": "schemas.chunk.Chunk"})
    rec = decode_event(UploadEvent, raw)
    assert type(rec) is UploadEvent and rec == upload()
    with pytest.raises(TypeError):  # what Faust's decoding does with it: the agent would crash
        UploadEvent.loads(raw)


def test_reasons_are_short():
    r = reason(UploadEvent, b"{" + b'"k": 1,' * 10_000)
    assert len(r) <= 200


def test_supported_schema_version_is_each_records_own_default():
    for value_type in RECORD_TYPES:
        assert supported_schema_version(value_type) == SUPPORTED_SCHEMA_VERSION == 1


# --- properties -----------------------------------------------------------------------

def _strategy(annotation) -> st.SearchStrategy:
    """Values of a record field's annotation that survive JSON."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return st.none() | st.one_of(*(_strategy(a) for a in args))
    base = origin or annotation
    scalars = st.text(max_size=20) | st.integers(-2**53, 2**53) | st.booleans()
    return {
        str: st.text(max_size=40),
        int: st.integers(-2**63, 2**63 - 1),
        float: st.floats(allow_nan=False, allow_infinity=False),
        bool: st.booleans(),
        list: st.lists(scalars, max_size=5),
        dict: st.dictionaries(st.text(max_size=10), scalars, max_size=5),
    }[base]


def _records(value_type) -> st.SearchStrategy:
    fields = {name: _strategy(annotation) for name, annotation in value_type._options.fields.items()
              if name != "schema_version"}
    return st.builds(value_type, **fields)


@pytest.mark.parametrize("value_type", RECORD_TYPES, ids=lambda t: t.__name__)
@hsettings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_record_type_round_trips(value_type, data):
    rec = data.draw(_records(value_type))
    back = decode_event(value_type, rec.dumps())
    assert type(back) is value_type and back == rec
    assert back.asdict() == rec.asdict()


@hsettings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=200) | st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["document_id", "version", "status", "seq", "stage", "project", "x"]),
        inner, max_size=7),
    max_leaves=20).map(orjson.dumps))
def test_anything_is_a_record_or_an_undecodable_record(raw):
    """Whatever the bytes, decoding never fails any other way (no agent crash)."""
    try:
        rec = decode_event(StatusEvent, raw)
    except UndecodableRecord as exc:
        assert exc.reason
    else:
        assert isinstance(rec, StatusEvent) and isinstance(rec.version, int)
