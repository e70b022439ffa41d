"""OpenTelemetry traces of document versions (issue 28 item 3); off by default.

One trace per document version, from upload to its terminal status:

- ``upload`` — the root span, where a version is queued (:func:`root_span` in
  streams/ingest.queue_version: the CLI, the API, a sync);
- one span per stage that works on the version (``normalize``, ``partition`` — one
  per part —, ``chunk``, ``enhance``, ``embed``, ``index``, …; :func:`stage_spans`
  in agents/runner.py), each the child of the span that sent the record it reads.

The context travels in the Kafka record headers as W3C Trace Context
(``traceparent``/``tracestate``): every send of the stages (agents/context.py
``TrackedTopic.send``) and of the uploader (streams/kafka_io.send_record) injects the
span of the record's document version (:func:`headers_for`); every agent loop hands
the headers of the events it reads to :func:`receiving`.  A batch of several
documents (embed, index) gets one span per document version in it, each with its own
parent.  Spans carry ``ragstream.document_id``, ``ragstream.version``,
``ragstream.project`` and ``ragstream.stage`` — never text, queries or vectors; a
failed version's span has status ERROR with the failure code.  JSON log lines carry
the active span's trace id (streams/log_format.py).

Settings (:func:`configure`, per process): ``RAGSTREAM_TRACING`` ``off`` (default:
no SDK loaded, nothing exported), ``otlp`` (OTLP over HTTP/protobuf, batched; the
endpoint is OpenTelemetry's own ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, default http://localhost:4318/v1/traces) or
``file`` (one JSON span per line appended to ``RAGSTREAM_TRACE_FILE``: tests and
debugging).  Service name: ``OTEL_SERVICE_NAME`` or ``ragstream-<role>``.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Any, Iterable, Iterator, Optional, Sequence

_enabled = False
#: value bytes of the events an agent loop is working on → their headers
_incoming: ContextVar[dict[bytes, Any]] = ContextVar("ragstream_incoming_headers", default={})
#: (document id, version) → the open span of that version in this task
_open: ContextVar[dict[tuple[str, int], Any]] = ContextVar("ragstream_open_spans", default={})


def enabled() -> bool:
    """Whether :func:`configure` turned tracing on in this process."""
    return _enabled


def configure(mode: str, role: str, trace_file: str = "") -> None:
    """Install the process's tracer provider: ``mode`` ``"off"`` (nothing), ``"otlp"``
    or ``"file"`` (``trace_file``, JSON lines); ``role`` names the service
    (``ragstream-<role>`` unless ``OTEL_SERVICE_NAME`` is set).  Idempotent; raises
    ValueError for another mode or a file mode without a file."""
    global _enabled
    if mode not in ("off", "otlp", "file"):
        raise ValueError(f"RAGSTREAM_TRACING must be off, otlp or file, not {mode!r}")
    if mode == "off" or _enabled:
        return
    import os

    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or f"ragstream-{role}"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    if mode == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        if not trace_file:
            raise ValueError("RAGSTREAM_TRACING=file needs RAGSTREAM_TRACE_FILE")
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        out = open(trace_file, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 — the process's lifetime
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
            out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(provider)
    _enabled = True
    import atexit

    atexit.register(shutdown)


def shutdown() -> None:
    """Flush and stop the exporter (a process ending; spans of a batch processor
    would be lost otherwise)."""
    if _enabled:
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if hasattr(provider, "shutdown"):
            provider.shutdown()


def _attributes(record: Any, stage: str) -> dict[str, Any]:
    return {"ragstream.document_id": str(record.document_id), "ragstream.version": int(record.version),
            "ragstream.project": str(getattr(record, "project", "")), "ragstream.stage": stage}


def _as_text_map(headers: Any) -> dict[str, str]:
    """Kafka headers (a mapping or ``[(name, bytes)]``) as the str → str carrier
    the W3C propagator reads."""
    items = headers.items() if hasattr(headers, "items") else (headers or [])
    out = {}
    for name, value in items:
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("latin-1")
        out[str(name).lower()] = str(value)
    return out


@contextlib.contextmanager
def receiving(events: Iterable[tuple[Optional[bytes], Any]]) -> Iterator[None]:
    """Within this block, the headers of ``events`` — ``(value bytes, headers)`` of
    the records an agent loop read — are found by their value (:func:`stage_spans`)."""
    if not _enabled:
        yield
        return
    token = _incoming.set({value: headers for value, headers in events if value is not None})
    try:
        yield
    finally:
        _incoming.reset(token)


def _parent(value: Optional[bytes]):
    from opentelemetry.propagate import extract

    headers = _incoming.get().get(value) if value is not None else None
    return extract(_as_text_map(headers)) if headers else None


@contextlib.contextmanager
def stage_spans(stage: str, records: Sequence[tuple[Any, Optional[bytes]]]) -> Iterator[None]:
    """One span named ``stage`` per document version among ``records`` —
    ``(record, value bytes it was decoded from)`` — each the child of the context in
    that record's headers (a new trace when there is none), open for the block; the
    only one is also the current span (log lines get its trace id)."""
    if not _enabled or not records:
        yield
        return
    from opentelemetry import trace

    tracer = trace.get_tracer("ragstream")
    spans: dict[tuple[str, int], Any] = {}
    for record, value in records:
        ref = (record.document_id, int(record.version))
        if ref not in spans:
            spans[ref] = tracer.start_span(stage, context=_parent(value), attributes=_attributes(record, stage))
    token = _open.set({**_open.get(), **spans})
    try:
        if len(spans) == 1:
            with trace.use_span(next(iter(spans.values())), end_on_exit=False):
                yield
        else:
            yield
    finally:
        _open.reset(token)
        for span in spans.values():
            span.end()


@contextlib.contextmanager
def root_span(name: str, record: Any) -> Iterator[None]:
    """The root span ``name`` of ``record``'s document version (the upload), open
    for the block, where :func:`headers_for` finds it."""
    with stage_spans(name, [(record, None)]):
        yield


def mark_failed(record: Any, code: str, reason: str) -> None:
    """Set the open span of ``record``'s version to ERROR with the failure ``code``
    (``reason`` is not recorded: a parser's sentence may name a file)."""
    span = _open.get().get((getattr(record, "document_id", None), getattr(record, "version", None)))
    if span is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("ragstream.error_code", code)
        span.set_status(Status(StatusCode.ERROR, code))  # the code only: a reason may name a file


def headers_for(record: Any, headers: Any = None) -> Any:
    """``headers`` (None or a list of ``(name, bytes)``) plus the W3C trace context of
    ``record``'s open version span (else of the current span); unchanged when
    tracing is off or there is no span."""
    if not _enabled:
        return headers
    from opentelemetry import trace
    from opentelemetry.propagate import inject

    span = _open.get().get((getattr(record, "document_id", None), getattr(record, "version", None)))
    context = trace.set_span_in_context(span) if span is not None else None
    carrier: dict[str, str] = {}
    inject(carrier, context=context)
    if not carrier:
        return headers
    out = [(k, v) for k, v in (headers.items() if hasattr(headers, "items") else (headers or []))]
    return out + [(k, v.encode("latin-1")) for k, v in carrier.items()]
