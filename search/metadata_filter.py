"""Filters on user metadata (schemas/user_metadata.py) as Milvus expressions.

A filter is a JSON object ``{key: condition}``; every key's condition must hold.
A condition is a scalar (equality) or an object of operators, as Pinecone and Chroma
spell them:

====================  ================================  =================================
operator              value                             Milvus expression
====================  ================================  =================================
``$eq`` / ``$ne``     string, number, boolean           ``metadata["k"] == v`` / ``exists …``
``$gt`` ``$gte``      number or string (ISO dates)      ``metadata["k"] > v`` …
``$lt`` ``$lte``
``$in`` / ``$nin``    list of scalars (1–64)            ``(… == a or … == b)`` / ``exists …``
``$contains``         string (the key holds a list)     ``json_contains(metadata["k"], v)``
``$contains_any``     list of strings (1–64)            ``json_contains_any(metadata["k"], […])``
``$exists``           boolean                           ``exists metadata["k"]`` / ``not …``
====================  ================================  =================================

Safety: the expression is built, never concatenated from client text.  Keys must
match ``[A-Za-z_][A-Za-z0-9_]{0,63}`` (no quoting needed); strings go through
``adapters.vector_store.quote_literal`` (double quotes, ``\\`` and ``"`` escaped;
control characters are refused by the value rules); numbers are written by Python
from validated ints and finite floats; booleans as ``true``/``false``.  Milvus Lite
3.2 takes no expression templates (``filter_params``: "unexpected character '{'",
measured 2026-12-05), hence literals.

Semantics measured on Milvus Lite 3.2: a chunk whose document has no such key (or no
metadata) matches no comparison, ``$ne`` and ``$nin`` included — ``$ne`` means "has
the key, with another value".  Milvus compares across JSON types (``1 == true``), so
the expression is a superset and :func:`matches` decides each hit; for ``$ne`` and
``$nin`` Milvus' own ``!=`` would drop a stored ``1`` for ``true`` (a hit ``matches``
could not bring back), so their expression is ``exists metadata["k"]`` alone.
``in`` is written as ``or`` of equalities (Milvus refuses ``metadata["k"] in [...]``:
"left side of 'in' must be a field reference").
"""
from __future__ import annotations

from typing import Any, Mapping

from adapters.vector_store import quote_literal
from schemas.user_metadata import MAX_KEYS, MAX_LIST, InvalidMetadata, check_key, check_scalar, load_json

COMPARISONS = {"$eq": "==", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
OPERATORS = (*COMPARISONS, "$in", "$nin", "$contains", "$contains_any", "$exists")


def literal(key: str, value: object) -> str:
    """A validated scalar as a Milvus literal (InvalidMetadata when it is not one)."""
    value = check_scalar(key, value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return quote_literal(value)


def _scalars(key: str, op: str, values: object) -> list[object]:
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_LIST:
        raise InvalidMetadata(f"filter on {key!r}: {op} takes a list of 1 to {MAX_LIST} values")
    return values


def condition(key: str, op: str, value: object) -> str:
    """One operator's Milvus expression on ``metadata[key]``."""
    field = f'metadata["{check_key(key)}"]'
    if op in COMPARISONS:
        if op not in ("$eq", "$ne") and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
            raise InvalidMetadata(f"filter on {key!r}: {op} compares numbers or strings")
        if op == "$ne":  # Milvus' != drops a stored 1 for true: only "has the key" here
            literal(key, value)  # validated all the same
            return f"exists {field}"
        return f"{field} {COMPARISONS[op]} {literal(key, value)}"
    if op in ("$in", "$nin"):
        either = " or ".join(f"{field} == {literal(key, v)}" for v in _scalars(key, op, value))
        return f"({either})" if op == "$in" else f"exists {field}"  # $nin: as $ne
    if op == "$contains":
        if not isinstance(value, str):
            raise InvalidMetadata(f"filter on {key!r}: $contains takes a string")
        return f"json_contains({field}, {literal(key, value)})"
    if op == "$contains_any":
        values = _scalars(key, op, value)
        if not all(isinstance(v, str) for v in values):
            raise InvalidMetadata(f"filter on {key!r}: $contains_any takes a list of strings")
        return f"json_contains_any({field}, [{', '.join(literal(key, v) for v in values)}])"
    if op == "$exists":
        if not isinstance(value, bool):
            raise InvalidMetadata(f"filter on {key!r}: $exists takes true or false")
        return f"exists {field}" if value else f"not (exists {field})"
    raise InvalidMetadata(f"filter on {key!r}: unknown operator {op[:32]!r} (one of {', '.join(OPERATORS)})")


def metadata_expr(spec: object) -> str:
    """The Milvus expression of a metadata filter (``""`` for an empty one).

    ``spec``: ``{key: scalar | {operator: value, ...}}`` as in the module docstring.

    Raises:
        InvalidMetadata: not an object, a bad key, operator or value.
    """
    if not isinstance(spec, Mapping):
        raise InvalidMetadata("metadata_filter must be a JSON object")
    if len(spec) > MAX_KEYS:
        raise InvalidMetadata(f"metadata_filter has {len(spec)} keys; at most {MAX_KEYS}")
    parts: list[str] = []
    for key, cond in spec.items():
        check_key(key)
        if isinstance(cond, Mapping):
            if not cond:
                raise InvalidMetadata(f"filter on {key!r}: no operator given")
            parts += [condition(key, str(op), value) for op, value in cond.items()]
        else:
            parts.append(condition(key, "$eq", cond))
    return " and ".join(f"({p})" for p in parts)


def _kind(value: object) -> str:
    """JSON type of a metadata value; Milvus compares ``true`` equal to ``1``, this
    does not (booleans are not numbers)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _equal(stored: object, wanted: object) -> bool:
    return _kind(stored) == _kind(wanted) and stored == wanted


def _holds(meta: Mapping, key: str, op: str, value: Any) -> bool:
    if op == "$exists":
        return (key in meta) == value
    if key not in meta:
        return False  # no comparison holds on a missing key ($ne and $nin included)
    stored = meta[key]
    if op == "$eq":
        return _equal(stored, value)
    if op == "$ne":
        return not _equal(stored, value)
    if op in ("$in", "$nin"):
        return any(_equal(stored, v) for v in value) == (op == "$in")
    if op in ("$contains", "$contains_any"):
        wanted = [value] if op == "$contains" else value
        return isinstance(stored, list) and any(v in stored for v in wanted)
    if _kind(stored) != _kind(value) or _kind(value) not in ("number", "str"):
        return False
    return {"$gt": stored > value, "$gte": stored >= value,
            "$lt": stored < value, "$lte": stored <= value}[op]


def matches(metadata: object, spec: Mapping) -> bool:
    """Whether a document's user ``metadata`` (a dict, or None for none) passes the
    filter ``spec`` with JSON's types kept apart, as the module docstring's table
    reads.  The search applies it to Milvus' hits (search/query.py): Milvus compares
    across types (``metadata["n"] == true`` holds for a stored ``1``, measured on
    Milvus Lite 3.2, 2026-12-05), so its expression alone can return a document the
    filter does not match.  ``spec`` must have passed :func:`metadata_expr`."""
    meta = metadata if isinstance(metadata, Mapping) else {}
    for key, cond in spec.items():
        ops = cond.items() if isinstance(cond, Mapping) else [("$eq", cond)]
        if not all(_holds(meta, key, str(op), value) for op, value in ops):
            return False
    return True


def parse_filter(text: str) -> dict[str, Any]:
    """The CLI's ``--metadata-filter '{"team": "ops"}'`` (equality on each key, or the
    operators above): a JSON object parsed and checked (:func:`metadata_expr`);
    InvalidMetadata when it is not one."""
    spec = load_json(text, "metadata filter")
    metadata_expr(spec)
    return spec
