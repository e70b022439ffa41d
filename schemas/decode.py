"""Decode one message value into a record, or say precisely why it is poison.

Stages consume raw bytes and call :func:`decode_event` themselves, so that a record
that is not JSON, has the wrong shape, misses fields or comes from a newer schema
becomes an :class:`UndecodableRecord` with a short reason (and then a dead letter)
instead of an exception inside Faust's own decoding, which would crash the agent and
lose the record.

What counts as a valid record of type ``T`` (a ``faust.Record`` from ``schemas/``):

- the value is a UTF-8 JSON object (orjson);
- every field of ``T`` without a default is present;
- every present field has its annotated basic type: ``str``, ``int`` (not a JSON
  boolean), ``float`` (a JSON integer is accepted and made a float), ``bool``,
  ``list``, ``dict``, ``Optional[X]`` (``null`` or ``X``); element types of lists and
  dicts are not checked;
- ``schema_version`` (default 1 when absent) is an int from 1 up to the version this
  code writes for ``T`` (its ``schema_version`` default, see
  :func:`supported_schema_version`). Older versions are accepted (upgrading them is the
  record's business); newer ones are rejected, because a schema bump means a change
  this code cannot read correctly.

Unknown extra fields are accepted and dropped (forward compatibility): a newer
producer may add an optional field without bumping ``schema_version``, and consumers
that do not know it keep working; anything incompatible must bump
``schema_version``. The decoded record equals what ``T(**known_fields)`` builds (Faust's
own ``T.loads`` would instead keep unknown keys as stray attributes, and
``T(**kwargs)`` rejects them with TypeError). The Faust metadata key ``__faust``
(``{"ns": "module.Class"}``) is ignored: the shape is checked structurally against
``T``, never by the type name a producer wrote, so a record cannot make the consumer
instantiate another class.
"""
from __future__ import annotations

import functools
import types
import typing
from typing import Any, Callable, Optional, TypeVar

import faust
import orjson

SUPPORTED_SCHEMA_VERSION = 1
"""The ``schema_version`` every record type in ``schemas/`` writes today (each
record's ``schema_version`` default). Bumping one record's default raises what
:func:`decode_event` accepts for that record alone."""

_REASON_MAX = 200  # characters of a reason, so a dead letter stays readable
_METADATA_KEY = "__faust"

R = TypeVar("R", bound=faust.Record)


class UndecodableRecord(ValueError):
    """A message value that is not a valid record of the expected type.

    ``reason`` is short and specific, e.g. ``"not JSON: unexpected end of data: line 1
    column 2 (char 1)"``, ``"not a JSON object"``, ``"missing field(s) document_id,
    version"``, ``"field version: expected int, got str"``, ``"schema_version 7 is newer
    than supported 1"``, ``"empty value"``. ``str(exc) == exc.reason``.
    """

    def __init__(self, reason: str) -> None:
        if len(reason) > _REASON_MAX:
            reason = reason[: _REASON_MAX - 1] + "…"
        super().__init__(reason)
        self.reason = reason


def supported_schema_version(value_type: type[faust.Record]) -> int:
    """The newest ``schema_version`` that ``value_type`` understands: its field default
    (1 for every record today); :data:`SUPPORTED_SCHEMA_VERSION` if it declares none."""
    return int(value_type._options.defaults.get("schema_version", SUPPORTED_SCHEMA_VERSION))


def decode_event(value_type: type[R], raw: Optional[bytes]) -> R:
    """Decode a message value (orjson bytes) into a ``value_type`` record.

    ``raw`` is the Kafka message value as received (``None`` for a tombstone).
    Returns a new ``value_type`` instance built from the known fields (unknown ones
    dropped). Raises :class:`UndecodableRecord` with a specific reason for anything
    that is not a valid record of that type (see the module docstring for the rules).
    """
    if not raw:
        raise UndecodableRecord("empty value")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UndecodableRecord(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UndecodableRecord(f"not a JSON object (got {_json_type(data)})")
    return record_from_dict(value_type, data)


def record_from_dict(value_type: type[R], data: dict[str, Any]) -> R:
    """Validate a decoded JSON object against ``value_type`` and build the record.

    Same rules and errors as :func:`decode_event` after JSON parsing.
    """
    required, checks, supported = _plan(value_type)
    missing = [name for name in required if name not in data]
    if missing:
        raise UndecodableRecord(f"missing field(s) {', '.join(missing)}")
    kwargs: dict[str, Any] = {}
    for name, check, expected in checks:
        if name in data:
            ok, value = check(data[name])
            if not ok:
                raise UndecodableRecord(f"field {name}: expected {expected}, got {_json_type(data[name])}")
            kwargs[name] = value
    if supported is not None:
        version = kwargs.get("schema_version", 1)
        if version > supported:
            raise UndecodableRecord(f"schema_version {version} is newer than supported {supported}")
        if version < 1:
            raise UndecodableRecord(f"schema_version {version} is not a version (must be >= 1)")
    try:
        return value_type(**kwargs)
    except (TypeError, ValueError) as exc:  # a record's own validation, if it has any
        raise UndecodableRecord(f"invalid {value_type.__name__}: {exc}") from None


_Check = Callable[[Any], "tuple[bool, Any]"]


@functools.lru_cache(maxsize=None)
def _plan(value_type: type[faust.Record]) -> tuple[tuple[str, ...], tuple[tuple[str, _Check, str], ...],
                                                   Optional[int]]:
    """Per record type, computed once: (required field names in declaration order,
    (name, checker, expected type name) per field, supported schema_version or None
    when the type has no ``schema_version`` field)."""
    fields: dict[str, Any] = value_type._options.fields
    defaults: dict[str, Any] = value_type._options.defaults
    required = tuple(name for name in fields if name not in defaults)
    checks = tuple((name, _checker(annotation), _type_name(annotation)) for name, annotation in fields.items())
    supported = supported_schema_version(value_type) if "schema_version" in fields else None
    return required, checks, supported


def _checker(annotation: Any) -> _Check:
    """A function value → (whether it fits ``annotation``, the value to store: ints
    made floats) for one field's annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        nullable = type(None) in args
        inner = [_checker(a) for a in args if a is not type(None)]

        def union(value: Any) -> tuple[bool, Any]:
            if value is None:
                return nullable, None
            for check in inner:
                ok, conformed = check(value)
                if ok:
                    return True, conformed
            return False, value
        return union
    base = origin or annotation
    if base is typing.Any or not isinstance(base, type):
        return lambda value: (True, value)
    if base is bool:
        return lambda value: (isinstance(value, bool), value)
    if base is int:
        return lambda value: (isinstance(value, int) and not isinstance(value, bool), value)
    if base is float:
        def to_float(value: Any) -> tuple[bool, Any]:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False, value
            return True, float(value)
        return to_float
    for json_type in (str, list, dict):
        if issubclass(base, json_type):
            return lambda value, t=json_type: (isinstance(value, t), value)
    return lambda value: (True, value)  # nested records and other types: left to the record


def _type_name(annotation: Any) -> str:
    """``int``, ``list``, ``str or null`` for an annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        if type(None) in typing.get_args(annotation):
            names.append("null")
        return " or ".join(names)
    base = origin or annotation
    return getattr(base, "__name__", str(base))


def _json_type(value: Any) -> str:
    """The JSON value's type as Python names it (``null`` for None)."""
    return "null" if value is None else type(value).__name__
