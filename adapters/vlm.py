"""Client of an OpenAI-compatible vision-language model (chat completions) that
summarises table and image chunks for the enhance stage.

One :class:`VlmClient` per worker process (``agents.enhance.vlm_client``): an
``httpx.AsyncClient`` against ``settings.vlm_base_url``, a semaphore of
``settings.vlm_max_concurrency`` calls in flight, ``settings.vlm_timeout_s`` per call.

One summary is ``POST {base}/v1/chat/completions`` with ``{"model", "messages",
"max_tokens", "temperature": 0}``: a system prompt asking for at most
:data:`SUMMARY_WORDS` words of plain text, then a user message whose content parts
are the table HTML as text, or the image crop(s) as ``image_url`` parts holding
``data:image/png;base64,...`` URLs plus whatever text the chunk has.  The reply's
``choices[0].message.content`` is the summary; its ``usage`` (``prompt_tokens``,
``completion_tokens``) is counted in ``ragstream_vlm_tokens_total``; every attempt
is counted in ``ragstream_vlm_calls_total`` and timed in
``ragstream_vlm_call_seconds`` (streams/metrics.py).

Retries (tenacity, as everywhere in the code base): transport errors and timeouts
(``httpx.TransportError``, transient in ``agents.retry_policy`` too), HTTP 408, 429
and 5xx are retried ``settings.vlm_max_retries`` times with exponential backoff
(0.5 s doubling, at most 8 s); any other HTTP status or a reply without a text
answer is not.  Whatever ends the attempts is raised as :class:`VlmUnavailable`,
which the enhance stage turns into the deterministic rendering plus a note: a model
outage never fails a document.
"""
from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from typing import Optional

import httpx
from tenacity import (AsyncRetrying, retry_if_exception, stop_after_attempt,
                      wait_exponential)

from streams.metrics import VLM_CALLS, VLM_SECONDS, VLM_TOKENS
from streams.settings import Settings

#: the longest summary asked for, in words (the enhance stage also cuts to fit)
SUMMARY_WORDS = 60
#: completion tokens allowed per call (60 words with room for long words)
MAX_COMPLETION_TOKENS = 160
SYSTEM_PROMPT = (
    "You summarise one table or image taken from a document, for a search index. "
    f"Answer in at most {SUMMARY_WORDS} words of plain text, in the document's language: "
    "what it shows, its subject, and the key names, figures and units. "
    "No preamble, no markdown.")
RETRY_STATUS = frozenset({408, 429})


class VlmUnavailable(Exception):
    """The model gave no summary: ``reason`` is a short sentence (status, timeout,
    connection error, bad reply) and ``attempts`` how many calls were made."""

    def __init__(self, reason: str, attempts: int = 1):
        super().__init__(reason)
        self.reason, self.attempts = reason, attempts


class _Retryable(Exception):
    """An HTTP status worth another attempt (408, 429, 5xx)."""


@dataclass(frozen=True)
class VlmRequest:
    """What to summarise.

    ``kind``: ``"table"`` or ``"image"``; ``text``: the chunk's text (an image's
    caption or OCR text, a table's plain text); ``table_html``: the table piece's
    HTML; ``images``: ``(bytes, mime type)`` per image crop; ``where``: e.g.
    ``"report.pdf, page 3"`` (context for the model).
    """

    kind: str
    text: str = ""
    table_html: Optional[str] = None
    images: list[tuple[bytes, str]] = field(default_factory=list)
    where: str = ""


@dataclass(frozen=True)
class VlmSummary:
    """A model answer: ``text`` (stripped), ``model`` (as the server named it),
    tokens from ``usage`` (0 when the server reports none), ``attempts`` (≥ 1),
    ``seconds`` (wall time of the successful call)."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    seconds: float


def build_messages(req: VlmRequest) -> list[dict]:
    """The chat ``messages`` for ``req``: system prompt, then one user message whose
    content is a list of parts (``{"type": "text"}`` and ``{"type": "image_url",
    "image_url": {"url": "data:<mime>;base64,<...>"}}``)."""
    intro = f"A {req.kind}" + (f" from {req.where}" if req.where else "") + "."
    parts: list[dict] = []
    if req.kind == "table" and req.table_html:
        parts.append({"type": "text", "text": f"{intro} Its HTML:\n{req.table_html}"})
    else:
        text = req.text.strip()
        parts.append({"type": "text", "text": intro + (f" Text with it:\n{text}" if text else "")})
    for data, mime in req.images:
        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": parts}]


def parse_reply(data: dict) -> tuple[str, str, int, int]:
    """``(text, model, prompt_tokens, completion_tokens)`` of a chat-completions
    reply.  Raises VlmUnavailable when it holds no text answer."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise VlmUnavailable("reply has no choices[0].message.content") from None
    if isinstance(content, list):  # some servers answer in parts
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        raise VlmUnavailable("reply has an empty answer")
    usage = data.get("usage") or {}
    return (" ".join(content.split()), str(data.get("model") or ""),
            int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


def _retry_worthy(exc: BaseException) -> bool:
    return isinstance(exc, (httpx.TransportError, _Retryable))


class VlmClient:
    """Summaries from the configured model; see the module docstring.

    ``client``: an ``httpx.AsyncClient`` to use instead of a new one (tests).
    Create inside the event loop that will use it (the semaphore binds to it).
    """

    def __init__(self, settings: Settings, client: Optional[httpx.AsyncClient] = None):
        self.base_url = settings.vlm_base_url.rstrip("/")
        self.model = settings.vlm_model
        self.max_retries = max(0, settings.vlm_max_retries)
        headers = {"Authorization": f"Bearer {settings.vlm_api_key}"} if settings.vlm_api_key else {}
        self._http = client or httpx.AsyncClient(timeout=httpx.Timeout(settings.vlm_timeout_s),
                                                 headers=headers)
        self._gate = asyncio.Semaphore(max(1, settings.vlm_max_concurrency))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, req: VlmRequest, body: dict) -> tuple[dict, float]:
        """One attempt under the concurrency gate: (reply JSON, seconds)."""
        async with self._gate:
            started = time.perf_counter()
            try:
                resp = await self._http.post(f"{self.base_url}/v1/chat/completions", json=body)
            finally:
                VLM_SECONDS.labels(req.kind).observe(time.perf_counter() - started)
        if resp.status_code in RETRY_STATUS or resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code}")
        if resp.status_code != 200:
            raise VlmUnavailable(f"HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            return resp.json(), time.perf_counter() - started
        except ValueError:
            raise VlmUnavailable("reply is not JSON") from None

    async def summarise(self, req: VlmRequest) -> VlmSummary:
        """The model's summary of ``req``.  Raises VlmUnavailable after
        ``vlm_max_retries`` retries of transient failures, or at once on others."""
        body = {"model": self.model, "messages": build_messages(req),
                "max_tokens": MAX_COMPLETION_TOKENS, "temperature": 0}
        retrying = AsyncRetrying(
            retry=retry_if_exception(_retry_worthy), stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential(multiplier=0.5, max=8), reraise=True,
            before_sleep=lambda rs: VLM_CALLS.labels("retried", req.kind).inc())
        try:
            async for attempt in retrying:
                with attempt:
                    data, seconds = await self._call(req, body)
            text, model, prompt, completion = parse_reply(data)
        except VlmUnavailable as exc:
            VLM_CALLS.labels("error", req.kind).inc()
            exc.attempts = retrying.statistics.get("attempt_number", 1)
            raise
        except (httpx.HTTPError, _Retryable) as exc:
            VLM_CALLS.labels("error", req.kind).inc()
            n = retrying.statistics.get("attempt_number", 1)
            raise VlmUnavailable(f"{type(exc).__name__}: {exc or 'no detail'} "
                                 f"(after {n} attempt(s))", n) from exc
        VLM_CALLS.labels("ok", req.kind).inc()
        VLM_TOKENS.labels("prompt").inc(prompt)
        VLM_TOKENS.labels("completion").inc(completion)
        return VlmSummary(text, model or self.model, prompt, completion,
                          retrying.statistics.get("attempt_number", 1), seconds)
