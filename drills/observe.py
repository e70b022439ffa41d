"""What a drill observes: the callbacks a loopback receiver gets (:class:`Receiver`)
and every status event of the drill's project on the changelog (:class:`Recorder`).
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

from drills.checks import Callback, Ev, all_terminal
from streams.document_ids import scoped_id
from streams.settings import Settings


class Receiver:
    """An HTTP server on 127.0.0.1 (random port) that answers 200 to every POST and
    records it as a :class:`Callback` (Idempotency-Key header + JSON body)."""

    def __init__(self) -> None:
        from adapters.callbacks import IDEMPOTENCY_HEADER

        self.calls: list[Callback] = []
        lock = threading.Lock()
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with lock:
                    calls.append(Callback(self.headers.get(IDEMPOTENCY_HEADER), body, time.time()))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        """The receiver's TCP port on 127.0.0.1."""
        return self.server.server_address[1]

    def url(self, project: str) -> str:
        return f"http://127.0.0.1:{self.port}/callbacks/{project}"

    def for_project(self, project: str) -> list[Callback]:
        """The project's callbacks, each body's ``document_id`` (the project's own id,
        as receivers get it) turned back into the scoped id the status events and the
        idempotency key carry (streams/document_ids.py)."""
        out = []
        for c in list(self.calls):
            body = c.body or {}
            if body.get("project") != project:
                continue
            if isinstance(body.get("document_id"), str):
                try:
                    body = {**body, "document_id": scoped_id(project, body["document_id"])}
                except ValueError:
                    pass  # a malformed id stays as it came: the checks report it
            out.append(replace(c, body=body))
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------ status recorder
class Recorder:
    """Tails the status changelog from the beginning and keeps one project's events
    (as :class:`Ev`); reconnects when the broker goes away (re-reads are removed by
    the checks' deduplication)."""

    def __init__(self, settings: Settings, project: str):
        self.settings, self.project = settings, project
        self.events: list[Ev] = []
        self.errors = 0
        self.last_event = time.monotonic()
        self._task: Optional[asyncio.Task] = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        from streams.kafka_io import tail_status

        while True:
            try:
                async for ev in tail_status(self.settings.kafka_bootstrap, from_beginning=True):
                    if ev.project == self.project:
                        self.events.append(Ev(ev.document_id, int(ev.version), ev.status, float(ev.at),
                                              int(ev.chunks_total or 0), ev.stage, ev.error))
                        self.last_event = time.monotonic()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 — broker restarts: tail again
                self.errors += 1
                await asyncio.sleep(1.0)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass

    def completed(self, expected: dict[str, int]) -> set[str]:
        return {e.document_id for e in self.events
                if e.status == "COMPLETED" and expected.get(e.document_id) == e.version}

    def terminal_count(self, expected: dict[str, int]) -> int:
        return len(expected) - len(all_terminal(expected, self.events))
