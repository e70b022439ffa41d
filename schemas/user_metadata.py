"""User metadata: the JSON object a client attaches to a document at upload.

It is stored with the document version (``document_versions.user_metadata``,
revision 0006) and written onto every chunk of that version in Milvus (the JSON
field ``metadata``), where search filters on it (search/metadata_filter.py).

What is accepted (:func:`check_metadata`), everything else is refused with a
:class:`InvalidMetadata` naming the key and the rule:

- a JSON object of at most :data:`MAX_KEYS` keys, each ``[A-Za-z_][A-Za-z0-9_]{0,63}``
  (a key is put into a Milvus expression as ``metadata["key"]``; this alphabet needs
  no quoting at all);
- values: strings (≤ :data:`MAX_STRING` characters, no control characters), booleans,
  integers within ±2**53 (what every JSON reader keeps exact), finite floats, and
  lists of at most :data:`MAX_LIST` strings.  Dates are ISO 8601 strings
  (``2024-05-01`` or ``2024-05-01T08:00:00Z``): compared as strings, so a range
  filter orders them correctly when a key's values share one form.  ``null`` and
  nested objects are refused (a filter could not tell them apart from a missing key);
- at most :data:`MAX_BYTES` bytes as compact JSON.

The metadata is a document's content: it is blanked when the document is deleted
(adapters/erasure.py), like its file name.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

import orjson

MAX_KEYS = 32
MAX_STRING = 1024
MAX_LIST = 64
MAX_BYTES = 8192
SAFE_INT = 2 ** 53
KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InvalidMetadata(ValueError):
    """User metadata (or a filter on it) that breaks a rule; the message names the
    key and the rule, and never quotes a value."""


def check_key(key: object) -> str:
    """``key`` when it is a metadata key (:data:`KEY_RE`), else InvalidMetadata."""
    if not isinstance(key, str) or not KEY_RE.fullmatch(key):  # not echoed: hostile text
        what = f"of {len(key)} characters" if isinstance(key, str) else f"of type {type(key).__name__}"
        raise InvalidMetadata(f"a metadata key ({what}) must match [A-Za-z_][A-Za-z0-9_]{{0,63}}")
    return key


def check_scalar(key: str, value: object) -> Any:
    """``value`` when it is a scalar metadata value (string, bool, safe integer,
    finite float), else InvalidMetadata naming ``key``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > SAFE_INT:
            raise InvalidMetadata(f"metadata {key!r}: integers must be within ±2**53")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMetadata(f"metadata {key!r}: numbers must be finite")
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise InvalidMetadata(f"metadata {key!r}: strings are at most {MAX_STRING} characters")
        if _CONTROL.search(value):
            raise InvalidMetadata(f"metadata {key!r}: strings must not hold control characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): was a 500 from Milvus
            raise InvalidMetadata(f"metadata {key!r}: strings must be valid Unicode "
                                  "(no lone surrogates)") from None
        return value
    kind = "null" if value is None else type(value).__name__
    raise InvalidMetadata(f"metadata {key!r}: {kind} is not allowed (strings, numbers, booleans, "
                          "ISO 8601 date strings, lists of strings)")


def check_metadata(data: object) -> dict[str, Any]:
    """The validated metadata object (a new dict, keys in the given order).

    Raises:
        InvalidMetadata: not an object, too many keys or bytes, a bad key or value.
    """
    if not isinstance(data, Mapping):
        raise InvalidMetadata("metadata must be a JSON object")
    if len(data) > MAX_KEYS:
        raise InvalidMetadata(f"metadata has {len(data)} keys; at most {MAX_KEYS}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        check_key(key)
        if isinstance(value, list):
            if len(value) > MAX_LIST:
                raise InvalidMetadata(f"metadata {key!r}: lists hold at most {MAX_LIST} strings")
            if not all(isinstance(v, str) for v in value):
                raise InvalidMetadata(f"metadata {key!r}: lists may hold strings only")
            out[key] = [check_scalar(key, v) for v in value]
        else:
            out[key] = check_scalar(key, value)
    size = len(orjson.dumps(out))
    if size > MAX_BYTES:
        raise InvalidMetadata(f"metadata is {size} bytes as JSON; at most {MAX_BYTES}")
    return out


def load_json(text: str, what: str) -> Any:
    """``text`` parsed as JSON; InvalidMetadata naming ``what`` ("metadata",
    "metadata filter") and where the text stops being JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidMetadata(f"{what} is not valid JSON: {exc.msg} at character {exc.pos}") from None


def parse_metadata(text: str) -> dict[str, Any]:
    """``text`` (a JSON object, e.g. a CLI option or a multipart form field) as
    validated metadata; InvalidMetadata when it is not JSON or breaks a rule."""
    if len(text.encode("utf-8", "surrogatepass")) > 4 * MAX_BYTES:
        raise InvalidMetadata(f"metadata is longer than {4 * MAX_BYTES} bytes")
    return check_metadata(load_json(text, "metadata"))
