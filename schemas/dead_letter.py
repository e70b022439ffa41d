"""Dead letters: an event that failed permanently, with its error (topic ``dead-letters``)."""
from __future__ import annotations

import faust

from schemas import codec


class DeadLetter(faust.Record, serializer=codec.CODEC_NAME):
    """The failed event (as its JSON-able dict), where it failed, and why."""

    document_id: str
    version: int
    stage: str
    source_topic: str
    error: str
    attempts: int
    payload: dict
    at: float
    schema_version: int = 1
