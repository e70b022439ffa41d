"""OpenTelemetry traces (streams/tracing.py, issue 28 item 3): a document version is
one trace from its upload to COMPLETED, a span per stage, the context carried in the
Kafka record headers; OTLP over HTTP reaches a real receiver; spans carry ids, never
the document's text."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from conftest import ROOT, TRACE_FILE, ingest

STAGES = ("upload", "normalize", "partition", "chunk", "enhance", "embed", "index")


def test_otlp_export_reaches_a_receiver_with_the_version_attributes(tmp_path):
    """A real OTLP/HTTP exporter, configured as a process configures it
    (RAGSTREAM_TRACING=otlp, OpenTelemetry's own endpoint variable), posts the
    upload span to a receiver here; the body decodes as an ExportTraceServiceRequest."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    bodies: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 — http.server's name
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = ("from streams import tracing\n"
              "from schemas import UploadEvent\n"
              "tracing.configure('otlp', 'probe')\n"
              "ev = UploadEvent(document_id='p.d', version=3, action='upload', project='p', category='c',"
              " filename='secret-name.pdf', bucket='b', key='k', sha256='0', size=1)\n"
              "with tracing.root_span('upload', ev):\n"
              "    print(dict(tracing.headers_for(ev)))\n")
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{server.server_port}/v1/traces"}
    try:
        out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=60)
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr
    assert "traceparent" in out.stdout
    assert bodies, "the exporter posted nothing"
    request = ExportTraceServiceRequest()
    request.ParseFromString(bodies[0])
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert [s.name for s in spans] == ["upload"]
    attributes = {a.key: (a.value.string_value or a.value.int_value) for a in spans[0].attributes}
    assert attributes == {"ragstream.document_id": "p.d", "ragstream.version": 3, "ragstream.project": "p",
                          "ragstream.stage": "upload"}
    assert b"secret-name" not in bodies[0]


def test_a_bad_tracing_mode_is_refused():
    from streams import tracing

    with pytest.raises(ValueError, match="off, otlp or file"):
        tracing.configure("jaeger", "t")


def _spans(path: Path) -> list[dict]:
    if not path.exists():
        return []
    spans = []
    for line in path.read_text().splitlines():
        try:
            spans.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line being written
    return spans


@pytest.mark.integration
def test_one_trace_per_document_version_with_a_span_per_stage(stack, worker, tmp_path, project):
    from streams import tracing

    own_file = tmp_path / "uploader-traces.jsonl"
    tracing.configure("file", "pytest", str(own_file))  # this process uploads: the root span
    marker = "zqtrace" + uuid.uuid4().hex[:8]
    doc = tmp_path / "traced.txt"
    doc.write_text(f"The {marker} pump station logged its energy use per megalitre.\n")
    outcome = ingest([doc], project)
    result = outcome.results[0]
    assert outcome.last[result.document_id].status == "COMPLETED"
    worker_file = stack.data_dir / "logs" / TRACE_FILE
    deadline, mine = time.time() + 30, []
    while time.time() < deadline:
        mine = [s for s in _spans(own_file) + _spans(worker_file)
                if s["attributes"].get("ragstream.document_id") == result.document_id]
        if set(STAGES) <= {s["name"] for s in mine}:
            break
        time.sleep(0.5)
    names = {s["name"] for s in mine}
    assert set(STAGES) <= names, names
    assert {s["context"]["trace_id"] for s in mine} == {mine[0]["context"]["trace_id"]}
    by_id = {s["context"]["span_id"]: s for s in mine}
    root = [s for s in mine if s["parent_id"] is None]
    assert [s["name"] for s in root] == ["upload"]
    for span in mine:  # every other span hangs off a span of the same trace
        assert span["parent_id"] is None or span["parent_id"] in by_id, span
    assert all(s["attributes"]["ragstream.version"] == result.version for s in mine)
    assert marker not in worker_file.read_text() and marker not in own_file.read_text()
    # the worker's JSON log lines of this document carry the trace id
    trace_id = mine[0]["context"]["trace_id"].removeprefix("0x")
    log_lines = [json.loads(line) for line in (stack.data_dir / "logs" / "worker.log").read_text().splitlines()
                 if line.startswith("{") and result.document_id in line]
    assert log_lines and any(line.get("trace_id") == trace_id for line in log_lines)
