"""Upload bodies are bounded whatever their shape (issue 23, item 10).

Before: plain form fields were not counted (only each one's length), a chunked
request (no Content-Length) skipped the only whole-body check (an endless epilogue
after the last boundary was read for ever), and a reference upload's key could climb out of ``incoming/{project}/`` with
``..``.  The parser tests need no stack (bodies without a file part never touch
S3); the API test runs the app in-process against the test stack.
"""
from __future__ import annotations

import uuid

import httpx
import pytest
from pydantic import ValidationError

from api.documents import ReferenceUpload
from api.uploads import (FIELDS_BYTES_MAX, FIELDS_MAX, MULTIPART_OVERHEAD, BadUpload, UploadTooLarge,
                         read_capped, receive_multipart)
from tests.conftest import run

BOUNDARY = "b0undary"
CTYPE = f"multipart/form-data; boundary={BOUNDARY}"


def _field(name: str, value: bytes, extra_headers: bytes = b"") -> bytes:
    return (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n".encode()
            + extra_headers + b"\r\n" + value + b"\r\n")


def _end() -> bytes:
    return f"--{BOUNDARY}--\r\n".encode()


async def _chunks(parts, size: int = 65536):
    """The body as a chunked request delivers it: pieces of ``size`` bytes."""
    for part in parts:
        for i in range(0, len(part), size):
            yield part[i:i + size]


def _parse(parts, **kw):
    return run(receive_multipart(_chunks(parts), CTYPE, store=None, staging_prefix="staging/t/",
                                 max_bytes=kw.pop("max_bytes", 1 << 20), **kw))


def test_a_few_fields_pass():
    fields, staged, _ = _parse([_field("project", b"p"), _field("category", b"c"), _end()])
    assert fields == {"project": "p", "category": "c"} and staged is None


def test_too_many_form_fields_are_refused():
    parts = [_field(f"f{i}", b"x") for i in range(10_000)] + [_end()]
    with pytest.raises(UploadTooLarge, match=f"number of form fields exceeds the limit of {FIELDS_MAX}"):
        _parse(parts)


def test_form_fields_together_are_bounded():
    parts = [_field(f"f{i}", b"x" * 8000) for i in range(FIELDS_MAX)] + [_end()]
    with pytest.raises(UploadTooLarge, match=f"form fields together exceed.*{FIELDS_BYTES_MAX}"):
        _parse(parts)


def test_one_field_is_still_bounded():
    with pytest.raises(BadUpload, match="longer than 8192 bytes"):
        _parse([_field("project", b"x" * 9000), _end()])


def test_a_huge_part_header_is_refused_by_the_parser():
    """python-multipart's own limit (4224 bytes a header line; held before too)."""
    junk = b"X-Junk: " + b"a" * (4 * 1024 * 1024) + b"\r\n"
    with pytest.raises(BadUpload, match="Maximum header size exceeded"):
        _parse([_field("project", b"p", junk), _end()])


def test_a_chunked_body_is_capped_as_a_whole():
    """No Content-Length: the parser counts what arrives.  Bytes after the closing
    boundary (an epilogue, which the multipart parser skips) are still body."""
    epilogue = b"z" * (3 * 1024 * 1024)
    with pytest.raises(UploadTooLarge, match="request body exceeds the limit of 2097152 bytes"):
        _parse([_field("project", b"p"), _end(), epilogue], max_bytes=1024 * 1024,
               max_request_bytes=2 * 1024 * 1024)
    # the default cap is the file limit plus the overhead
    with pytest.raises(UploadTooLarge, match=f"limit of {1024 + MULTIPART_OVERHEAD} bytes"):
        _parse([_field("project", b"p"), _end(), epilogue], max_bytes=1024)


def test_read_capped():
    assert run(read_capped(_chunks([b"a" * 100]), 100)) == b"a" * 100
    with pytest.raises(UploadTooLarge, match="JSON body exceeds the limit of 100 bytes"):
        run(read_capped(_chunks([b"a" * 101], size=7), 100, "a JSON body"))


@pytest.mark.parametrize("key", ["incoming/p/../q/x.pdf", "incoming/p/./x.pdf", "incoming/p//x.pdf",
                                 "/incoming/p/x.pdf", "incoming/p/x/", "..", "incoming/p/.."])
def test_reference_keys_with_dot_segments_are_refused(key):
    with pytest.raises(ValidationError, match="empty, '.' or '..' segments"):
        ReferenceUpload.model_validate({"source": {"bucket": "ragstream", "key": key}})


def test_reference_keys_with_dots_inside_names_pass():
    ref = ReferenceUpload.model_validate({"source": {"bucket": "ragstream", "key": "incoming/p/a..b/.x.pdf"}})
    assert ref.source.key == "incoming/p/a..b/.x.pdf"


# -- through the app, on the test stack -------------------------------------------------------
def _post(stack, **kw) -> httpx.Response:
    """POST /v1/documents: :func:`_post_to`."""
    return _post_to(stack, "/v1/documents", **kw)


def _post_to(stack, path: str, **kw) -> httpx.Response:
    """POST ``path`` to the app in-process (its ApiState opened by hand, in this
    test's event loop: no lifespan needed) with a 1 MiB upload limit, as a fresh
    project's key; ``kw`` may use ``{project}`` in ``json``."""
    from api.app import create_app
    from api.state import ApiState

    settings = stack.model_copy(update={"api_max_upload_bytes": 1024 * 1024})
    project = "lim-" + uuid.uuid4().hex[:8]

    async def go():
        app, state = create_app(settings), ApiState(settings)
        await state.open()
        app.state.api = state
        try:
            key = (await state.keys.create(project)).key
            if "json" in kw:
                kw["json"]["source"]["key"] = kw["json"]["source"]["key"].format(project=project)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                         timeout=120) as c:
                return await c.post(path, headers={"X-API-Key": key, **kw.pop("headers", {})},
                                    **kw)
        finally:
            await state.close()
    return run(go())


def test_api_chunked_request_with_many_fields_answers_413(stack):
    async def body():  # a generator: httpx sends it chunked, without Content-Length
        yield _field("file", b"hello", b"Content-Type: text/plain\r\n").replace(
            b'name="file"', b'name="file"; filename="a.txt"')
        for i in range(2_000):  # far past FIELDS_MAX (16); the server stops reading at the 17th
            yield _field(f"f{i}", b"x" * 16)
        yield _end()

    r = _post(stack, content=body(), headers={"Content-Type": CTYPE})
    assert r.status_code == 413, r.text
    assert "form fields" in r.json()["detail"]


def test_api_reference_key_with_dotdot_answers_422(stack):
    r = _post(stack, json={"source": {"bucket": "ragstream", "key": "incoming/{project}/../other/x.pdf"}})
    assert r.status_code == 422, r.text
    assert "'..' segments" in r.text


@pytest.mark.parametrize("body", [b"\x00", b"\xff\xfe", b'{"source": "\\u0000"', b"[]"])
def test_api_json_body_that_is_not_json_answers_422_without_echoing_it(stack, body):
    """The API fuzz (tests/test_tenants.py) found POST /v1/documents with a JSON
    content type and the body ``\\x00`` answering 500: the 422's detail carried the
    raw bytes, which the JSON response could not encode.  The detail names the
    problem and never echoes what the client sent."""
    r = _post(stack, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert "input" not in r.json()["detail"][0]


@pytest.mark.parametrize("body", [b'{"query": "\\ud800"}', b'{"query": "ok", "\\udfff": 1}',
                                  b'{"query": ["\\ud800"]}'])
def test_api_search_with_a_lone_surrogate_answers_422(stack, body):
    """A newcomer's attack found ``POST /v1/search`` with the query ``"\\ud800"``
    answering 500: FastAPI's 422 echoed a string UTF-8 cannot encode.  Every route's
    validation errors go through api/errors.py now: 422, nothing echoed."""
    r = _post_to(stack, "/v1/search", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert all("input" not in e for e in r.json()["detail"])


def test_error_details_are_made_encodable():
    from api.errors import encodable, validation_detail

    assert encodable({"\ud800": ("a", b"\xff", 1, None)}) == {"\\ud800": ["a", "\ufffd", 1, None]}
    detail = validation_detail([{"type": "x", "loc": ("body", "\udfff"), "msg": "m", "input": "\ud800",
                                 "ctx": {"a": 1}, "url": "u"}])
    assert detail == [{"type": "x", "loc": ["body", "\\udfff"], "msg": "m"}]
