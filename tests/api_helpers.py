"""Shared by the API, callback and dashboard tests: the API as a real uvicorn
subprocess (``ragstream api``), keys made with ``ragstream apikey create``, an SSE
reader, and a local callback receiver that verifies signatures.

Imported by the test modules at collection time, so the settings below are in the
environment before the session's worker starts: the callback receiver's host name
``localhost`` is allow-listed (``127.0.0.1`` is not, so the refusal test can use it),
and retries back off from 0.3 s.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Optional

import httpx


ROOT = Path(__file__).resolve().parents[1]
UPLOAD_LIMIT = 4 * 1024 * 1024  # bytes: the test API's RAGSTREAM_API_MAX_UPLOAD_BYTES


def free_port() -> int:
    """A free TCP port on 127.0.0.1, from this process's range (devstack/ports.py: not
    an ephemeral port, which any outgoing connection may take before the server binds)."""
    from devstack.ports import free_port_block

    return free_port_block(1)


class ApiServer:
    """``python -m cli.main api`` on a free loopback port (log: data_dir/logs/api.log)."""

    def __init__(self, data_dir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log = Path(data_dir) / "logs" / "api.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "RAGSTREAM_API_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
               "RAGSTREAM_LOG_FORMAT": "json"}  # tests/test_log_format.py greps this log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "api", "--host", "127.0.0.1", "--port", str(self.port),
             "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            assert self.proc.poll() is None, f"API exited at start; see {log}"
            try:
                if httpx.get(self.url + "/readyz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"API not ready in 60 s; see {log}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        stop_process(self.proc)


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Stop a server the test started: SIGTERM, then SIGKILL after ``grace_s`` seconds
    (nothing when it has already exited)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


_server: Optional[ApiServer] = None


def api_server(data_dir: Path) -> ApiServer:
    """One API server per test process (stopped by :func:`stop_api_server`)."""
    global _server
    if _server is None or _server.proc.poll() is not None:
        _server = ApiServer(data_dir)
    return _server


def stop_api_server() -> None:
    """Stop the process-wide API server if one runs."""
    global _server
    if _server is not None:
        _server.stop()
        _server = None


def create_key(project: str) -> str:
    """A new API key for ``project`` from the CLI contract: the last line printed."""
    out = subprocess.run([sys.executable, "-m", "cli.main", "apikey", "create", "--project", project],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip().splitlines()[-1]


def project_secret(project: str) -> str:
    """The project's callback signing secret (``ragstream apikey secret``)."""
    out = subprocess.run([sys.executable, "-m", "cli.main", "apikey", "secret", "--project", project],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip().splitlines()[-1]


def upload(base: str, key: str, path: Path, **fields: str) -> httpx.Response:
    """Multipart upload of ``path`` (field ``file``) with extra form ``fields``."""
    with open(path, "rb") as fh:
        return httpx.post(f"{base}/v1/documents", headers={"X-API-Key": key},
                          files={"file": (path.name, fh)}, data=fields, timeout=60)


def wait_status(base: str, key: str, document_id: str, wanted: set[str],
                timeout_s: float = 300) -> dict:
    """Poll ``GET /v1/documents/{id}`` until its status is in ``wanted``."""
    deadline = time.time() + timeout_s
    body: dict = {}
    while time.time() < deadline:
        r = httpx.get(f"{base}/v1/documents/{document_id}", headers={"X-API-Key": key}, timeout=30)
        if r.status_code == 200:
            body = r.json()
            if body["status"] in wanted:
                return body
        time.sleep(0.5)
    raise TimeoutError(f"{document_id} not in {wanted} after {timeout_s} s (last: {body})")


class SseReader:
    """Reads ``GET /v1/status/stream`` in a thread; ``events`` fills as frames arrive."""

    def __init__(self, base: str, key: str, **params: str):
        self.events: list[dict] = []
        self.error: Exception | None = None  # the stream broke before close()
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(base, key, params), daemon=True)
        self._thread.start()
        assert self.connected.wait(30), "SSE stream did not connect"

    def _run(self, base: str, key: str, params: dict) -> None:
        """Read until close(); a transport error after close() is the server going
        away (tests stop the API right after closing) and ends the thread quietly,
        one before it is kept in ``error`` for ``wait_for`` to report."""
        try:
            self._read(base, key, params)
        except httpx.TransportError as exc:
            if not self._stop.is_set():
                self.error = exc

    def _read(self, base: str, key: str, params: dict) -> None:
        with httpx.stream("GET", f"{base}/v1/status/stream", params=params,
                          headers={"X-API-Key": key}, timeout=httpx.Timeout(60, read=None)) as r:
            r.raise_for_status()
            event, data = "message", []
            for line in r.iter_lines():
                if line.startswith(": connected"):
                    self.connected.set()
                if self._stop.is_set():
                    return
                if line == "":
                    if event == "status" and data:
                        self.events.append(json.loads("\n".join(data)))
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())

    def wait_for(self, document_id: str, statuses: set[str], timeout_s: float = 300) -> list[dict]:
        """The events of ``document_id`` once one has a status in ``statuses``."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            mine = [e for e in self.events if e["document_id"] == document_id]
            if any(e["status"] in statuses for e in mine):
                return mine
            if self.error is not None:
                raise AssertionError(f"the SSE stream broke: {self.error!r}")
            time.sleep(0.2)
        raise TimeoutError(f"no {statuses} for {document_id} on the SSE stream")

    def close(self) -> None:
        """Stop reading (the thread ends at the next frame or ping)."""
        self._stop.set()


@dataclass
class Receiver:
    """A local HTTP callback receiver.  The first attempt of every idempotency key is
    answered 500 when ``fail_first``; later ones 200.  Every attempt is recorded with
    its verified-signature flag."""

    secret: str
    fail_first: bool = True
    port: int = 0  # 0: any free port
    attempts: list[dict] = field(default_factory=list)
    accepted: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self):
        from adapters.callbacks import SIGNATURE_HEADER, verify_signature

        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                key = self.headers.get("Idempotency-Key", "")
                ok = verify_signature(self.headers.get(SIGNATURE_HEADER), body, receiver.secret)
                seen = [a for a in receiver.attempts if a["key"] == key]
                code = 500 if (receiver.fail_first and not seen) else (200 if ok else 401)
                record = {"key": key, "verified": ok, "code": code, "body": json.loads(body or b"{}"),
                          "at": time.time(), "signature": self.headers.get(SIGNATURE_HEADER)}
                receiver.attempts.append(record)
                if code == 200:
                    receiver.accepted[key].append(record)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, host: str = "localhost") -> str:
        """The hook URL with ``host`` (``localhost`` is allow-listed in the tests)."""
        return f"http://{host}:{self.port}/hook"

    def wait_accepted(self, key: str, timeout_s: float = 120) -> list[dict]:
        """The accepted deliveries of ``key`` once there is at least one."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.accepted.get(key):
                return self.accepted[key]
            time.sleep(0.2)
        raise TimeoutError(f"no accepted callback {key}; attempts: {self.attempts}")

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def iter_dom_rows(html: str) -> Iterator[str]:  # pragma: no cover - debugging aid
    """Rows of the documents table in a DOM dump (for failure messages)."""
    for part in html.split("<tr")[1:]:
        yield "<tr" + part.split("</tr>")[0]
