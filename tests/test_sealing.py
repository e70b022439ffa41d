"""Sealing records with a document version's data key (schemas/sealing.py): what is
sealed, what stays clear, and that a destroyed key leaves nothing to read."""
from __future__ import annotations

import asyncpg
import pytest

from schemas import (Chunk, DeadLetter, EmbeddedChunk, PartitionTask, StatusEvent, UploadEvent,
                     decode_event, status_event, DocumentStatus)
from schemas.decode import record_from_dict
from schemas.sealing import SealBroken, new_data_key, open_record, seal_record

SECRET = "xyzzy-confidential"


def _chunk(**kw) -> EmbeddedChunk:
    fields = dict(chunk_id="p.d:1:0", document_id="p.d", version=1, index=0, total=1, project="p",
                  category="c", filename=f"{SECRET}.txt", text=f"the {SECRET} plan", page_number=0,
                  element_types=["NarrativeText"], table_html="<td>x</td>", embed_text=f"doc: {SECRET}",
                  summary="s", vector=[0.25, -0.5, 0.125], embedding_model="m")
    fields.update(kw)
    return EmbeddedChunk(**fields)


def test_content_is_sealed_and_the_routing_fields_stay_clear():
    key = new_data_key()
    sealed = seal_record(_chunk(), key)
    raw = sealed.dumps()
    assert SECRET.encode() not in raw and b"0.125" not in raw and b"<td>" not in raw
    clear = decode_event(EmbeddedChunk, raw)  # still a valid record of its topic
    assert (clear.document_id, clear.version, clear.index, clear.total, clear.project) == ("p.d", 1, 0, 1, "p")
    assert (clear.text, clear.filename, clear.vector, clear.embed_text) == ("", "", [], None)
    opened = open_record(clear, key)
    assert opened.asdict() == _chunk().asdict()


def test_every_record_type_with_a_file_name_seals_it():
    key = new_data_key()
    upload = UploadEvent(document_id="p.d", version=1, action="upload", project="p", category="c",
                         filename=f"{SECRET}.pdf", bucket="b", key="raw/k", sha256="0", size=1)
    task = PartitionTask(document_id="p.d", version=1, project="p", category="c", filename=f"{SECRET}.pdf",
                         bucket="b", callback_url=None, key="k", filetype="pdf")
    status = status_event("p.d", 1, DocumentStatus.QUEUED, stage="upload", project="p",
                          filename=f"{SECRET}.pdf")
    for record in (upload, task, status, Chunk(**{k: v for k, v in _chunk().asdict().items()
                                                   if k not in ("vector", "embedding_model")})):
        sealed = seal_record(record, key)
        assert SECRET.encode() not in sealed.dumps(), type(record).__name__
        assert open_record(decode_event(type(record), sealed.dumps()), key).filename == f"{SECRET}.pdf" \
            or type(record) is Chunk
    assert isinstance(seal_record(status, key), StatusEvent)


def test_a_destroyed_key_opens_blank_and_a_wrong_key_or_document_does_not_open():
    key = new_data_key()
    sealed = seal_record(_chunk(), key)
    blank = open_record(sealed, None)
    assert (blank.text, blank.filename, blank.vector, blank.sealed) == ("", "", [], None)
    with pytest.raises(SealBroken):
        open_record(sealed, new_data_key())
    moved = _chunk(document_id="p.other", text="", filename="", vector=[], embed_text=None,
                   table_html=None, summary=None)
    moved = EmbeddedChunk(**{**moved.asdict(), "sealed": sealed.sealed})
    with pytest.raises(SealBroken):  # the blob is bound to its document and version
        open_record(moved, key)
    assert SECRET.encode() not in seal_record(_chunk(), None).dumps()  # no key: content dropped


def test_a_dead_letter_seals_its_payload_and_redrives_a_sealed_record():
    key = new_data_key()
    letter = DeadLetter(document_id="p.d", version=1, stage="embed", source_topic="t",
                        error=f"[corrupt] bad PDF (pypdf: cannot read /tmp/{SECRET}.pdf)",
                        attempts=1, payload=_chunk().asdict(), at=0.0)
    sealed = seal_record(letter, key)
    assert SECRET.encode() not in sealed.dumps() and sealed.error == "[corrupt]"
    assert open_record(sealed, key).error == letter.error
    redriven = record_from_dict(EmbeddedChunk, sealed.payload)  # what dlq redrive sends
    assert open_record(redriven, key).text == f"the {SECRET} plan"


def test_records_without_content_and_sealed_records_pass_unchanged():
    key = new_data_key()
    sealed = seal_record(_chunk(), key)
    assert seal_record(sealed, key).sealed == sealed.sealed
    plain = _chunk(sealed=None)
    assert open_record(plain, key) is plain


def test_an_undecodable_records_dead_letter_keeps_its_reason_in_the_clear():
    from schemas import undecodable_dead_letter

    letter = undecodable_dead_letter(stage="normalize", source_topic="t", key=b"k", raw=b"\x00not json",
                                     reason="undecodable: not JSON")
    assert seal_record(letter, new_data_key()).error == "undecodable: not JSON"


_KEY_STORE_AWAY = [
    ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 25432)"),
    # a pooled connection that PostgreSQL's shutdown broke (CI, 2026-12-04)
    asyncpg.exceptions._base.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    TimeoutError(),
]


@pytest.mark.parametrize("away", _KEY_STORE_AWAY, ids=lambda e: type(e).__name__)
def test_status_for_display_outlives_the_key_store_being_away(away):
    """A follow (ingest --wait, status --follow, SSE) shows an event whose key cannot be
    read -- PostgreSQL refusing connections, or a pooled connection its shutdown broke --
    with its file name blank, and does not raise: CI runs of
    test_postgres_outage_fails_nothing_and_loses_no_status died in cli/progress on
    ConnectionRefusedError (2026-12-02) and on asyncpg's InternalClientError (2026-12-04)
    while PostgreSQL was stopped."""
    import asyncio

    from streams.kafka_io import open_for_display

    key = new_data_key()
    ev = seal_record(StatusEvent(document_id="p.d", version=1, status="QUEUED", seq=1, stage="api",
                                 project="p", filename="secret-plans.pdf"), key)

    class Away:
        async def open(self, record):
            raise away

    shown = asyncio.run(open_for_display(ev, Away()))
    assert shown.status == "QUEUED" and "secret-plans" not in shown.filename


def test_status_for_display_raises_what_is_not_an_outage():
    """A bug in opening (not the key store being away) is not hidden as a blank name."""
    import asyncio

    from streams.kafka_io import open_for_display

    ev = seal_record(StatusEvent(document_id="p.d", version=1, status="QUEUED", seq=1, stage="api",
                                 project="p", filename="x.pdf"), new_data_key())

    class Broken:
        async def open(self, record):
            raise TypeError("open() got an unexpected keyword argument")

    with pytest.raises(TypeError):
        asyncio.run(open_for_display(ev, Broken()))


def test_a_partial_completions_failed_parts_are_sealed_and_open_again():
    key = new_data_key()
    parts = [{"part": f"{SECRET}.pdf", "code": "skipped", "reason": "encrypted attachment"}]
    event = status_event("p.d", 1, DocumentStatus.COMPLETED, stage="index", project="p",
                         filename="f.eml", failed_parts=parts)
    assert event.partial is True
    raw = seal_record(event, key).dumps()
    assert SECRET.encode() not in raw
    clear = decode_event(StatusEvent, raw)
    assert (clear.partial, clear.failed_parts) == (True, [])
    assert open_record(clear, key).failed_parts == parts
