"""Sealing a record's document content with its version's data key (crypto-shredding).

The broker keeps the topics ``uploads``, ``enhanced-chunks``, ``embeddings`` and
``status`` for ever, and it never compacts (streams/broker_quirks.py, quirk 10): a
record's bytes cannot be removed from a topic.  So every record that carries document
content carries it sealed: the content fields are moved into one ``sealed`` field,
encrypted with AES-256-GCM (``cryptography``'s AESGCM) under the data key of the
record's document version (adapters/document_keys.py), and blanked in the clear.
Deleting the document destroys the key; the sealed bytes left on the topics, in dead
letters and in replays are then noise.

What stays clear (it routes records and counts work): document id, version, project,
category, chunk index and totals, page numbers, element types, object keys, status.
What is sealed: :data:`CONTENT_FIELDS` — the file name, chunk text, embed text, table
HTML, VLM summary and enrichment, the vector, and a status's failed parts (their reasons may name
an attachment).

``sealed`` is ``"v1:" + base64(nonce (12 bytes) + ciphertext + tag (16 bytes))`` of
the orjson object ``{field: value}``; the associated data is
``"{document_id}|{version}"``, so a sealed blob moved onto another document's record
does not open.  Records written before sealing (``sealed`` None) pass through as
they are.
"""
from __future__ import annotations

import base64
import os
from typing import Any, Optional, TypeVar

import faust
import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

#: bytes of a data key (AES-256)
KEY_BYTES = 32
_NONCE_BYTES = 12
_PREFIX = "v1:"

#: content field → its blank value in the clear once sealed (or shredded)
CONTENT_FIELDS: dict[str, Any] = {
    "filename": "", "text": "", "embed_text": None, "table_html": None,
    "summary": None, "enrichment": None, "vector": [], "failed_parts": [],
}

#: a dead letter's own content: its error, whose detail may quote the document (a
#: parser's message naming the file); its clear value is the ``[code]`` tag alone
DEAD_LETTER_FIELDS: dict[str, Any] = {"error": ""}

R = TypeVar("R", bound=faust.Record)


class SealBroken(ValueError):
    """A ``sealed`` field that does not open with the key given: not a v1 blob, or
    the key, the blob or the document identity does not match (GCM tag check)."""


def new_data_key() -> bytes:
    """A fresh random data key (:data:`KEY_BYTES` bytes from ``os.urandom``)."""
    return AESGCM.generate_key(bit_length=8 * KEY_BYTES)


def _aad(document_id: str, version: int) -> bytes:
    return f"{document_id}|{int(version)}".encode()


def seal_fields(data: dict[str, Any], key: Optional[bytes], document_id: str,
                version: int, fields: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """``data`` (a record as a dict) with its :data:`CONTENT_FIELDS` moved into
    ``data["sealed"]`` under ``key``, blanked in the clear.  ``key`` None (the
    version's key is destroyed, or never made for a deleted version): the content is
    dropped, not sealed.  A dict already sealed, or without content, is returned
    unchanged."""
    fields = CONTENT_FIELDS if fields is None else fields
    if data.get("sealed"):
        return data
    content = {f: data[f] for f in fields if f in data and data[f] not in (None, "", [])}
    if not content:
        return data
    out = {**data, **{f: fields[f] for f in content}}
    if key is not None:
        nonce = os.urandom(_NONCE_BYTES)
        blob = nonce + AESGCM(key).encrypt(nonce, orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY),
                                           _aad(document_id, version))
        out["sealed"] = _PREFIX + base64.b64encode(blob).decode("ascii")
    return out


def open_fields(data: dict[str, Any], key: Optional[bytes], document_id: str,
                version: int) -> dict[str, Any]:
    """``data`` with the content of ``data["sealed"]`` put back and ``sealed`` None.
    ``key`` None (shredded): the blanked content stays blank.  Raises
    :class:`SealBroken` when the blob does not open with ``key``."""
    sealed = data.get("sealed")
    if not sealed:
        return data
    out = {**data, "sealed": None}
    if key is None:
        return out
    if not isinstance(sealed, str) or not sealed.startswith(_PREFIX):
        raise SealBroken("sealed field is not a v1 blob")
    try:
        blob = base64.b64decode(sealed[len(_PREFIX):], validate=True)
        plain = AESGCM(key).decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], _aad(document_id, version))
        content = orjson.loads(plain)
    except (ValueError, InvalidTag, orjson.JSONDecodeError) as exc:
        raise SealBroken(f"sealed field does not open: {type(exc).__name__}") from None
    out.update({f: v for f, v in content.items() if f in CONTENT_FIELDS or f in DEAD_LETTER_FIELDS})
    return out


def carries_content(record: faust.Record) -> bool:
    """Whether ``record`` has a ``sealed`` field (its type is sealed on the wire), or
    is a dead letter of a failed event (whose payload is a record that may be); not
    the dead letter of an undecodable record (nothing of it is a document's content
    ragstream could read: its raw bytes are kept as they came, sealed or not)."""
    if getattr(record, "reason_code", None) == "undecodable":
        return False  # a poison record's dead letter: its error is the decoder's reason, its raw the bytes as read
    return "sealed" in record._options.fields or "payload" in record._options.fields


def seal_record(record: R, key: Optional[bytes]) -> R:
    """``record`` with its content sealed under ``key`` (:func:`seal_fields`); for a
    dead letter, its ``payload`` (the failed record as a dict) is sealed, so
    ``dlq redrive`` sends a sealed record back, and its ``error`` too (in the clear:
    the ``[code]`` tag only).  Types without content are returned
    as they are."""
    if not carries_content(record):
        return record
    data = record.asdict()
    if "payload" in data:  # a dead letter: the failed record, and the error
        data["payload"] = seal_fields(dict(data.get("payload") or {}), key,
                                      record.document_id, record.version)
        error = data.get("error") or ""
        data = seal_fields(data, key, record.document_id, record.version, DEAD_LETTER_FIELDS)
        if error.startswith("[") and "]" in error:
            data["error"] = error[:error.index("]") + 1]
    else:
        data = seal_fields(data, key, record.document_id, record.version)
    return type(record)(**data)


def open_record(record: R, key: Optional[bytes]) -> R:
    """``record`` with its sealed content put back (``key`` None: left blank).
    Raises :class:`SealBroken` (see :func:`open_fields`)."""
    if not getattr(record, "sealed", None):
        return record
    return type(record)(**open_fields(record.asdict(), key, record.document_id, record.version))
