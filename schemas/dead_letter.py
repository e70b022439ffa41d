"""Dead letters: an event that failed permanently, with its error (topic ``dead-letters``).

Two kinds, told apart by ``reason_code``:

- ``"failed"`` (:data:`FAILED`): the event decoded, its stage ran and failed for good
  (retries exhausted, or a permanent document error). ``payload`` is the event as its
  JSON-able dict (``record.asdict()``); ``raw``/``key`` may carry the original message.
- ``"undecodable"`` (:data:`UNDECODABLE`): a poison message that is not a valid record
  of the source topic's type (see ``schemas.decode``). ``payload`` is ``{}``; ``raw``
  holds the original value bytes (base64) and ``key`` the original message key, so the
  message can be inspected and re-sent byte for byte (``ragstream dlq redrive``).
  ``document_id``/``version`` are salvaged when possible (the key, or the value's own
  ``document_id``/``version`` fields), else ``""``/``0``.
"""
from __future__ import annotations

import base64
import binascii
import time
from typing import Optional

import faust
import orjson

from schemas import codec

FAILED = "failed"
UNDECODABLE = "undecodable"
REASON_CODES = (FAILED, UNDECODABLE)


class DeadLetter(faust.Record, serializer=codec.CODEC_NAME):
    """The failed event, where it failed, and why.

    ``stage`` is the stage that gave up; ``source_topic`` the topic the event was read
    from (where a redrive sends it back); ``error`` the readable reason; ``attempts``
    the tries made; ``payload`` the event as a dict (``{}`` when undecodable); ``at``
    the Unix time in seconds. ``raw`` is the original message value, base64 (None when
    not kept); ``key`` the original message key as text (None: use ``document_id``);
    ``reason_code`` is :data:`FAILED` or :data:`UNDECODABLE`.
    """

    document_id: str
    version: int
    stage: str
    source_topic: str
    error: str
    attempts: int
    payload: dict
    at: float
    raw: Optional[str] = None
    key: Optional[str] = None
    reason_code: str = FAILED
    sealed: Optional[str] = None  # the error, sealed with the version's data key (schemas/sealing.py)
    schema_version: int = 1

    def raw_bytes(self) -> Optional[bytes]:
        """The original message value (``raw`` decoded from base64), or None.

        Raises ValueError when ``raw`` is not valid base64.
        """
        if self.raw is None:
            return None
        try:
            return base64.b64decode(self.raw, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"dead letter raw is not base64: {exc}") from None

    def original_key(self) -> bytes:
        """The original message key: ``key`` when kept, else ``document_id`` (UTF-8)."""
        return (self.key if self.key is not None else self.document_id).encode()


def encode_raw(value: Optional[bytes]) -> Optional[str]:
    """Bytes → the base64 text kept in ``DeadLetter.raw`` (None stays None)."""
    return None if value is None else base64.b64encode(value).decode("ascii")


def undecodable_dead_letter(*, stage: str, source_topic: str, key: Optional[bytes],
                            raw: Optional[bytes], reason: str,
                            at: Optional[float] = None) -> DeadLetter:
    """A dead letter for a poison message (``reason_code="undecodable"``).

    ``key``/``raw`` are the message key and value exactly as consumed; ``reason`` is
    the ``UndecodableRecord`` reason. A non-UTF-8 key is kept with replacement
    characters (ragstream keys are document ids, always text).
    """
    key_text = key.decode("utf-8", errors="replace") if key is not None else None
    document_id, version = _salvage_identity(raw)
    return DeadLetter(
        document_id=document_id or key_text or "", version=version, stage=stage,
        source_topic=source_topic, error=reason, attempts=1, payload={},
        at=time.time() if at is None else at, raw=encode_raw(raw), key=key_text,
        reason_code=UNDECODABLE)


def _salvage_identity(raw: Optional[bytes]) -> tuple[Optional[str], int]:
    """(document_id, version) from a JSON object value when those fields are usable."""
    try:
        data = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None, 0
    if not isinstance(data, dict):
        return None, 0
    doc = data.get("document_id")
    version = data.get("version")
    return (doc if isinstance(doc, str) and doc else None,
            version if isinstance(version, int) and not isinstance(version, bool) else 0)
