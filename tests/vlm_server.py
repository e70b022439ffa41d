"""A stand-in OpenAI-compatible chat-completions server for the VLM tests.

No vision-language model weights can be installed on this machine, so the tests
talk to this small FastAPI app instead (the only mock in the VLM tests: everything
else — broker, S3, PostgreSQL, Milvus, Triton, the worker — is the real stack).

``POST /v1/chat/completions`` answers with a deterministic summary derived from the
request: for a table, its column names and row count read from the HTML in the text
part; for an image, one sentence chosen by the SHA-256 of the image bytes from
:data:`IMAGE_SENTENCES` plus the image's byte count.  ``usage`` counts words of
the prompt text (plus 85 per image) and of the answer.  Every request is recorded
(``server.requests``, with the decoded images), and the largest number of requests in
flight at once (``server.max_in_flight``).  ``server.fail_status`` (an HTTP status)
makes every call fail; ``server.delay_s`` makes each call that slow.

:class:`VlmServer` runs it with uvicorn in a thread on a loopback port:
``start()`` / ``stop()`` (a stopped server refuses connections, like one that is
down) and ``start()`` again on the same port.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

IMAGE_SENTENCES = (
    "A photograph of a red lighthouse standing on a rocky coast at sunset.",
    "A bar chart comparing quarterly rainfall at three reservoirs.",
    "A map of the river catchment with pumping stations marked in blue.",
    "A diagram of a sewage treatment process with settling tanks and filters.",
)


def table_summary(html: str) -> str:
    """``Summary of a table with columns A, B, C and N data rows.`` from table HTML."""
    rows = re.findall(r"<tr\b.*?</tr>", html, flags=re.S | re.I)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in
             re.findall(r"<t[hd]\b.*?</t[hd]>", rows[0], flags=re.S | re.I)] if rows else []
    return (f"Summary of a table with columns {', '.join(c for c in cells if c) or 'unnamed'} "
            f"and {max(0, len(rows) - 1)} data rows.")


def image_summary(data: bytes) -> str:
    """A sentence chosen by the image's SHA-256, and its size in bytes."""
    digest = hashlib.sha256(data).digest()
    return f"{IMAGE_SENTENCES[digest[0] % len(IMAGE_SENTENCES)]} ({len(data)} bytes)"


@dataclass
class Recorded:
    """One request as received: the JSON body, its text parts and decoded images."""

    body: dict
    texts: list[str]
    images: list[bytes]


@dataclass
class VlmServer:
    """The stand-in server; see the module docstring."""

    port: int = 0
    fail_status: Optional[int] = None
    delay_s: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _server: Optional[uvicorn.Server] = None
    _thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def completions(body: dict) -> Any:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                return self.answer(body)
            finally:
                self.in_flight -= 1

        return app

    def answer(self, body: dict) -> Any:
        texts, images = [], []
        for message in body.get("messages", []):
            content = message.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            for part in parts:
                if part.get("type") == "text" and message.get("role") == "user":
                    texts.append(part["text"])
                elif part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    images.append(base64.b64decode(url.split("base64,", 1)[1]))
        self.requests.append(Recorded(body, texts, images))
        if self.fail_status:
            return JSONResponse({"error": {"message": "told to fail"}}, status_code=self.fail_status)
        if images:
            answer = " ".join(image_summary(i) for i in images)
        else:
            answer = table_summary(" ".join(texts))
        prompt = sum(len(t.split()) for t in texts) + 85 * len(images)
        return {"id": f"cmpl-{len(self.requests)}", "object": "chat.completion",
                "model": body.get("model", "stand-in"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": len(answer.split()),
                          "total_tokens": prompt + len(answer.split())}}

    def start(self, timeout_s: float = 10.0) -> "VlmServer":
        """Serve on ``port`` (a free one the first time when 0); returns self once up."""
        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"stand-in VLM server did not start on {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop serving (connections are refused afterwards)."""
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(10)
            self._server = self._thread = None
