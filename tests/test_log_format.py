"""``RAGSTREAM_LOG_FORMAT=json`` (streams/log_format.py, issue 28 item 3): one JSON
object per line with the record's ids, and never a document's or a query's text.

The session's worker and the tests' API server log JSON (tests/conftest.py,
tests/api_helpers.py), so the whole suite runs on this format; the pipeline test
here plants a marker word in a document and in a query and greps both logs for it.
"""
from __future__ import annotations

import io
import json
import logging
import logging.config
import time
import uuid

import httpx
import pytest

from streams.log_format import configure, log_context, logging_config, record_fields


def _json_lines(config: dict, emit) -> list[dict]:
    """Run ``emit(logger)`` under ``config`` with its handler writing to a buffer."""
    buffer = io.StringIO()
    config["handlers"]["default"]["stream"] = buffer
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        logging.config.dictConfig(config)
        emit(logging.getLogger("ragstream.test"))
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_json_lines_carry_the_context_and_leave_out_empty_fields():
    def emit(logger):
        logger.info("outside")
        with log_context(stage="chunk"):
            with log_context(document_id="acme.doc-1", version=3, project="acme", trace_id=None):
                logger.warning("inside %s", "args")
            logger.info("stage only")
        try:
            raise KeyError("boom")
        except KeyError:
            logger.exception("failed")

    outside, inside, stage_only, failed = _json_lines(logging_config("json", "info"), emit)
    assert outside["message"] == "outside" and outside["level"] == "INFO"
    assert outside["logger"] == "ragstream.test" and "T" in outside["time"]
    assert not set(outside) & {"document_id", "version", "stage", "project", "trace_id"}
    assert inside["message"] == "inside args" and inside["level"] == "WARNING"
    assert (inside["document_id"], inside["version"], inside["stage"], inside["project"]) == \
        ("acme.doc-1", 3, "chunk", "acme")
    assert "trace_id" not in inside  # no span recording: no made-up id
    assert stage_only["stage"] == "chunk" and "document_id" not in stage_only
    assert "KeyError: 'boom'" in failed["exc_info"]


def test_text_format_is_the_callers_default_and_bad_names_are_refused():
    assert logging_config("text") is None
    configure("text")  # changes nothing
    with pytest.raises(ValueError, match="text or json"):
        logging_config("yaml")
    with pytest.raises(ValueError, match="not a log context field: text"):
        with log_context(text="a chunk's text"):
            pass


def test_record_fields_take_the_project_from_the_scoped_id():
    class Ref:
        document_id, version = "sales.q3-report", 2

    assert record_fields(Ref()) == {"document_id": "sales.q3-report", "version": 2, "project": "sales"}
    assert record_fields(object()) == {}


def test_settings_refuse_an_unknown_format(monkeypatch):
    from pydantic import ValidationError

    from streams.settings import Settings

    monkeypatch.setenv("RAGSTREAM_LOG_FORMAT", "xml")
    with pytest.raises(ValidationError):
        Settings()


@pytest.mark.integration
def test_pipeline_logs_are_json_with_ids_and_never_the_text(api, stack, project, tmp_path):
    from api_helpers import create_key, upload, wait_status

    doc_marker = "zqlogmarker" + uuid.uuid4().hex[:8]
    query_marker = "zqquerymarker" + uuid.uuid4().hex[:8]
    path = tmp_path / "notes.txt"
    path.write_text(f"Pump maintenance notes. The seal code is {doc_marker}.\n\n"
                    + "Inspect the impeller every month and record its wear.\n" * 20)
    key = create_key(project)
    worker_log = stack.data_dir / "logs" / "worker.log"
    start = worker_log.stat().st_size
    r = upload(api.url, key, path, category="default")
    assert r.status_code in (200, 201, 202), r.text
    doc = r.json()["document_id"]
    assert wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})["status"] == "COMPLETED"
    # a parser's message quotes the document (lxml names the mismatched tag): the
    # failure's reason goes to the status, never to the log (a newcomer's find)
    tag_marker = "zqtagmarker" + uuid.uuid4().hex[:8]
    broken = tmp_path / "broken.xml"
    broken.write_text(f'<?xml version="1.0"?>\n<root><{tag_marker}>pump</wrong></root>\n')
    r = upload(api.url, key, broken, category="default")
    assert r.status_code in (200, 201, 202), r.text
    failed = wait_status(api.url, key, r.json()["document_id"], {"COMPLETED", "FAILED"})
    assert failed["status"] == "FAILED", failed
    for query in (doc_marker, f"what is the seal code {query_marker}"):
        r = httpx.post(f"{api.url}/v1/search", json={"query": query, "k": 5},
                       headers={"X-API-Key": key}, timeout=120)
        assert r.status_code == 200, r.text
    time.sleep(1)  # the worker's last lines of this document

    logged = worker_log.read_bytes()[start:].decode("utf-8", "replace")
    api_logged = api.log.read_text(errors="replace")
    for marker in (doc_marker, query_marker, tag_marker):
        assert marker not in logged, "document or query text in the worker's log"
        assert marker not in api_logged, "document or query text in the API's log"
    records = [json.loads(line) for line in logged.splitlines() if line.startswith("{")]
    assert records, logged[-2000:]
    mine = [r for r in records if r.get("document_id") == f"{project}.{doc}"]
    assert mine, "no line carries the document's id"
    assert all(r["project"] == project and isinstance(r["version"], int) for r in mine)
    # one "done" line per stage the document went through, each with its ids
    done = {r["stage"] for r in mine if r["message"].startswith(f"{r['stage']}: done for ")}
    assert done >= {"normalize", "partition", "chunk", "embed", "index"}, sorted(done)
