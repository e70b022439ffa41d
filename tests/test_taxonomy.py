"""The failure taxonomy: every FAILED status carries a stable code and a human
sentence (never raw exception text), old status events decode, and the code reaches
PostgreSQL (document_versions.error_code), the API and the callback."""
from __future__ import annotations

import pickle
import re

import asyncpg
import orjson
import pytest

from stages import errors
from stages.errors import CODES, DocumentError, decode_reason, encode_reason


def _classes() -> list[type[DocumentError]]:
    return [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, DocumentError)]


def test_every_error_class_has_a_known_code_in_to_dict_and_survives_pickle():
    for cls in _classes():
        assert cls.code in CODES, cls
        exc = pickle.loads(pickle.dumps(cls("a sentence", detail="KeyError: 'x'")))
        assert type(exc) is cls and exc.code == cls.code and exc.detail == "KeyError: 'x'"
        assert exc.to_dict()["code"] == cls.code and "KeyError" not in str(exc.to_dict())
    assert {c.code for c in _classes()} >= {"encrypted", "password_protected", "corrupt", "empty",
                                            "unsupported_type", "too_large", "timeout",
                                            "out_of_memory", "conversion_failed",
                                            "ocr_unavailable", "parser_crashed", "internal"}


def test_readme_lists_every_code():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for code in CODES:
        assert re.search(rf"^\| `{code}` \|", readme, re.M), code


def test_parser_exception_text_goes_to_detail_not_reason():
    from stages.parse_errors import as_document_error

    exc = as_document_error(KeyError("There is no item named 'word/media/missing.png' in the archive"),
                            "DOCX")
    assert exc.code == "corrupt" and exc.reason.startswith("truncated or corrupt DOCX: ")
    assert "KeyError" not in exc.reason and "missing.png" in exc.detail
    bug = as_document_error(LookupError("unknown encoding: iso-8859-8-i"), "EML")
    assert bug.code == "conversion_failed" and "LookupError" not in bug.reason
    assert as_document_error(MemoryError(), "XLSX").code == "out_of_memory"


def test_runner_failures_are_sentences_with_codes():
    from agents.runner import failure_of
    from stages.pool import StageTimeout, WorkerCrashed

    internal = failure_of(KeyError("secret_internal_key"), "chunk")
    assert internal.code == "internal" and "secret_internal_key" not in internal.reason
    assert "KeyError" in internal.detail
    assert failure_of(StageTimeout("timeout after 600 s"), "partition").code == "timeout"
    assert failure_of(WorkerCrashed("parser process crashed"), "partition").code == "parser_crashed"


def test_ledger_reason_round_trip():
    assert decode_reason(encode_reason("corrupt", "truncated [x] PDF")) == ("corrupt", "truncated [x] PDF")
    assert decode_reason("timeout after 3600 s") == (None, "timeout after 3600 s")
    assert decode_reason("[nonsense] x") == (None, "[nonsense] x")


def test_status_event_error_code_is_wire_compatible():
    from schemas import DocumentStatus, StatusEvent, status_event
    from schemas.decode import decode_event

    old = orjson.dumps({"document_id": "d", "version": 1, "status": "FAILED", "seq": 190,
                        "stage": "partition", "project": "p", "error": "encrypted PDF"})
    assert decode_event(StatusEvent, old).error_code is None
    new = status_event("d", 1, DocumentStatus.FAILED, stage="partition", project="p",
                       error="encrypted PDF", error_code="encrypted")
    assert decode_event(StatusEvent, new.dumps()).error_code == "encrypted"


def _version_code(dsn: str, document_id: str) -> str | None:
    from conftest import run

    async def go():
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetchval("SELECT error_code FROM document_versions WHERE document_id = $1"
                                       " ORDER BY version DESC LIMIT 1", document_id)
        finally:
            await conn.close()

    return run(go())


@pytest.mark.slow
def test_failed_upload_carries_code_to_api_postgres_and_callback(api, project, stack):
    from adapters.callbacks import idempotency_key
    from api_helpers import Receiver, create_key, project_secret, upload, wait_status
    from streams.document_ids import scoped_id

    key = create_key(project)
    broken = stack.data_dir / f"broken-{project}.docx"
    broken.write_bytes(b"PK\x03\x04" + b"\x00" * 64 + b"not really a zip")
    receiver = Receiver(secret=project_secret(project), fail_first=False)
    try:
        r = upload(api.url, key, broken, project=project, callback_url=receiver.url("localhost"))
        assert r.status_code == 202, r.text
        doc = r.json()["document_id"]
        final = wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})
        assert final["status"] == "FAILED" and final["error_code"] in ("corrupt", "unsupported_type"), final
        assert not re.search(r"\b\w+Error\b|Traceback", final["error"]), final["error"]
        body = receiver.wait_accepted(idempotency_key(scoped_id(project, doc), 1, "FAILED"))[0]["body"]
        assert body["error_code"] == final["error_code"] and body["error"] == final["error"]
        assert body["document_id"] == doc  # the project's own id, as the API gave it
    finally:
        receiver.close()
    assert _version_code(stack.pg_dsn, scoped_id(project, doc)) == final["error_code"]
