"""The opaque cursor of ``GET /v1/documents``: keyset paging over the listing's order.

The listing is ordered by ``(created_at DESC, document_id DESC)``: a document's
``created_at`` is set when its projection row is first written and never changes, so
a document does not move between pages while it passes its stages (an order by
``updated_at`` did: a page boundary could show one document twice and skip another).
Offset paging over that order stays stable while documents change status; only new
uploads during the paging shift it. The cursor is stable under both: it names the
last row seen, and the next page starts strictly after it.

A cursor is ``base64url("<created_at ISO 8601>|<document_id>")`` without padding. It
is client input, hence hostile: anything that does not decode to that shape is
:class:`BadCursor` (the API answers 422).
"""
from __future__ import annotations

import base64
import binascii
from datetime import datetime

MAX_CURSOR_CHARS = 512  # a scoped id is at most ~200 chars; the ISO timestamp 32


class BadCursor(ValueError):
    """The cursor is not one the API handed out (undecodable or malformed)."""


def encode_cursor(created_at: datetime, document_id: str) -> str:
    """The cursor that resumes the listing after the row (``created_at``, ``document_id``);
    ``created_at`` must be timezone-aware (the column is ``timestamptz``)."""
    raw = f"{created_at.isoformat()}|{document_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """``(created_at, document_id)`` of the row a cursor names.

    Raises :class:`BadCursor` for anything else: too long, not base64url, no ``|``,
    a timestamp that does not parse or has no timezone, an empty id."""
    if not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise BadCursor("cursor: empty or too long")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor("cursor: not a cursor this API handed out") from None
    stamp, sep, document_id = raw.partition("|")
    if not sep or not document_id:
        raise BadCursor("cursor: not a cursor this API handed out")
    try:
        created_at = datetime.fromisoformat(stamp)
    except ValueError:
        raise BadCursor("cursor: not a cursor this API handed out") from None
    if created_at.tzinfo is None:
        raise BadCursor("cursor: not a cursor this API handed out")
    return created_at, document_id
