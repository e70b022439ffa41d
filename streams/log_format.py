"""Log lines as text or as JSON objects (``RAGSTREAM_LOG_FORMAT=text|json``).

``json`` writes one JSON object per line (python-json-logger) with the fields
``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, and those of the record
being worked on: ``document_id`` (the scoped id, ``project.id``), ``version``,
``stage``, ``project`` and ``trace_id`` (32 hex digits of the current OpenTelemetry
span when one is recording, else absent).  A field with no value is left out.  An
exception adds ``exc_info`` (its traceback as text).

The context comes from :func:`log_context`, a ``contextvars`` scope: the stage
runner (``agents/runner.py``) opens one per record, so every line logged while the
record is worked on, by any module, carries them; asyncio tasks started inside the
scope inherit it.  Work done in the parse process pool (``stages/``) logs without
the context: those processes log through the parent's stderr as text.

What a line never holds: the code logs ids, counts, stage names, error classes and
reasons; it never logs a chunk's or element's text, a query, a vector or a secret
(tests/test_log_format.py plants a marker word in a document and a query and greps
the worker's JSON log and the API's log for it after an ingest and a search).
Reasons can quote a file *name* (a client's choice, like the id).

Workers (``streams/worker.py``) pass :func:`logging_config` to Faust's worker, which
applies it with ``logging.config.dictConfig``; other processes (the supervisor, the
API server) call :func:`configure`.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import logging.config
import sys
from typing import Any, Iterator, Optional

from streams.document_ids import project_of

#: the record fields every JSON line can carry, in this order
CONTEXT_FIELDS = ("document_id", "version", "stage", "project", "trace_id")

_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("ragstream_log_context",
                                                                          default={})


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Within the ``with`` block (and the tasks started in it), log records carry
    ``fields`` (names from :data:`CONTEXT_FIELDS`; ``None`` values are dropped) on
    top of the enclosing scope's.  Raises ``ValueError`` for another name."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"not a log context field: {', '.join(sorted(unknown))}")
    merged = {**_context.get(), **{k: v for k, v in fields.items() if v is not None}}
    token = _context.set(merged)
    try:
        yield
    finally:
        _context.reset(token)


def record_fields(record: Any) -> dict[str, Any]:
    """The :func:`log_context` fields of a pipeline record (any ``schemas`` record with
    ``document_id``/``version``/``project``; missing attributes are left out)."""
    fields = {name: getattr(record, name, None) for name in ("document_id", "version", "project")}
    if fields["project"] is None and isinstance(fields["document_id"], str):
        fields["project"] = project_of(fields["document_id"])
    return {k: v for k, v in fields.items() if v is not None}


def _trace_id() -> Optional[str]:
    try:
        from opentelemetry import trace
    except ImportError:  # the API package is optional: no traces, no trace ids
        return None
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


class ContextFilter(logging.Filter):
    """Adds the current :func:`log_context` fields (and the OpenTelemetry trace id)
    to every record it sees; it never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in _context.get().items():
            setattr(record, name, value)
        trace_id = _trace_id()
        if trace_id:
            record.trace_id = trace_id
        return True


def json_formatter() -> logging.Formatter:
    """python-json-logger's formatter with the fields of the module docstring."""
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter("{asctime}{levelname}{name}{message}", style="{",
                         rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                         datefmt="%Y-%m-%dT%H:%M:%S%z", json_ensure_ascii=False)


def logging_config(fmt: str, level: str | int = "info") -> Optional[dict]:
    """A ``logging.config.dictConfig`` dict writing ``fmt`` lines (``"json"``) to
    stdout at ``level``, with :class:`ContextFilter` on the handler; ``None`` for
    ``"text"`` (the caller's own default).  Raises ``ValueError`` for another format."""
    if fmt == "text":
        return None
    if fmt != "json":
        raise ValueError(f"log format must be text or json, not {fmt!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": ContextFilter}},
        "formatters": {"json": {"()": json_formatter}},
        "handlers": {"default": {"class": "logging.StreamHandler", "stream": sys.stdout,
                                 "formatter": "json", "filters": ["context"]}},
        "root": {"level": logging.getLevelName(level.upper()) if isinstance(level, str) else level,
                 "handlers": ["default"]},
        # the worker's life-cycle lines (started, ready, restarted) at any loglevel
        "loggers": {"streams.worker": {"level": "INFO"}},
    }


def configure(fmt: str, level: str | int = "info") -> None:
    """Apply :func:`logging_config` to this process (nothing for ``"text"``)."""
    config = logging_config(fmt, level)
    if config is not None:
        logging.config.dictConfig(config)
