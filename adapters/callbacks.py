"""Completion callbacks: the outbox tables and delivery.

Tables (PostgreSQL, created by the revisions in adapters/migrations/):

- ``project_secrets`` — the HMAC secret of each project (created on first use, shown by
  ``ragstream apikey secret --project P``; ``--rotate`` makes a new one current and
  keeps the old one as ``previous_secret``, still signed with for
  ``settings.callback_secret_overlap_s`` after ``rotated_at``).
- ``callbacks`` — one row per (document, version, terminal status): the outbox.  Its
  primary key is the idempotency key ``{document_id}:v{version}:{status}``, so a
  redelivered or replayed status event never queues a second callback.  ``state`` is
  ``pending`` → ``delivered`` | ``refused`` (address not allowed) | ``failed``
  (attempts exhausted or a permanent 4xx); ``reason`` says why, ``attempts`` and
  ``last_code`` what happened.  The exact body is stored, so every attempt sends
  (and signs) the same bytes.

Delivery: ``POST`` with ``Content-Type: application/json``,
``X-Ragstream-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, f"{t}.{body}")>``
(adapters/callback_signature.py: the format, and ``verify_signature`` for receivers)
and ``Idempotency-Key``.  Each attempt has a total deadline
(``settings.callback_timeout_s``: connect, send, headers and body together) and reads
at most ``RESPONSE_READ_MAX`` bytes of the answer.  2xx → delivered; 408, 425, 429,
5xx, deadline and connection errors are retried with exponential backoff (tenacity)
up to a cap; other 4xx fail at once.  Redirects are not followed.  Logs name the URL
through :func:`redact_url` (no query, user-info or fragment: receivers put tokens
there).

Address guard: adapters/callback_guard.py (every address dialled must be globally
routable or allow-listed).

Size: one outbox: its tables and the delivery loop share the row states and the
retry schedule (signing and the address guard are modules of their own).
"""
from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Optional

import asyncpg
import httpx
import orjson
from prometheus_client import Counter
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from adapters.callback_guard import (AllowList, CallbackRefused, RetryableDelivery,  # noqa: F401 (re-exported)
                                     address_problem, check_url_syntax, guarded_client,
                                     redact_url)
from adapters.callback_signature import SIGNATURE_HEADER, sign, verify_signature  # noqa: F401 (re-exported)

from streams.document_ids import local_id

log = logging.getLogger(__name__)

IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRYABLE_CODES = frozenset({408, 425, 429}) | frozenset(range(500, 600))
RESPONSE_READ_MAX = 4096  # bytes of a receiver's answer read (for the reason); the rest is dropped

CALLBACKS_TOTAL = Counter("ragstream_callbacks_total",
                          "Callback outcomes by final state (delivered, refused, failed)", ["state"])
CALLBACK_ATTEMPTS = Counter("ragstream_callback_attempts_total",
                            "Callback HTTP attempts by result (2xx, 4xx, 5xx, error)", ["result"])


class PermanentDelivery(Exception):
    """An attempt failed in a way not worth retrying (e.g. 400, 401, 404, 410)."""

    def __init__(self, reason: str, code: Optional[int] = None):
        super().__init__(reason)
        self.reason, self.code = reason, code


# -- body ------------------------------------------------------------------------------
def idempotency_key(document_id: str, version: int, status: str) -> str:
    """``{document_id}:v{version}:{status}``: one callback per terminal state."""
    return f"{document_id}:v{version}:{status}"


def callback_body(*, document_id: str, project: str, version: int, status: str,
                  output: Optional[dict[str, str]], error: Optional[str], chunks: int,
                  at: float, error_code: Optional[str] = None,
                  failed_parts: Optional[list] = None) -> bytes:
    """The JSON body (bytes) of a callback.  ``at`` is the Unix time (s) of the state;
    ``error`` the human sentence and ``error_code`` the stable code of a FAILED one;
    ``partial``/``failed_parts`` a COMPLETED one's missing parts (adapters/failed_parts.py).
    ``document_id`` is the scoped id; the body carries the project's own id
    (streams/document_ids.py), as the API shows it."""
    return orjson.dumps({
        "event": f"document.{status.lower()}",
        "idempotency_key": idempotency_key(document_id, version, status),
        "document_id": local_id(project, document_id), "project": project, "version": version,
        "status": status,
        "output": output, "chunks": chunks, "error": error, "error_code": error_code,
        "partial": bool(failed_parts), "failed_parts": list(failed_parts or []),
        "at": datetime.fromtimestamp(at or time.time(), tz=timezone.utc).isoformat(),
        "at_unix": at,
    })


# -- outbox ----------------------------------------------------------------------------
class Callbacks:
    """The ``callbacks`` outbox and ``project_secrets`` over an asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool):
        self.pool = pool
        self.owner = uuid.uuid4().hex[:12]  # lease owner: this process

    async def secret(self, project: str) -> str:
        """The project's current HMAC secret, created (random 32 bytes, hex) on first use."""
        await self.pool.execute(
            "INSERT INTO project_secrets (project, callback_secret) VALUES ($1, $2) "
            "ON CONFLICT DO NOTHING", project, secrets.token_hex(32))
        return await self.pool.fetchval(
            "SELECT callback_secret FROM project_secrets WHERE project = $1", project)

    async def signing_secrets(self, project: str, overlap_s: float) -> list[str]:
        """The secrets a callback of ``project`` is signed with: ``[current]``, or
        ``[current, previous]`` while the last rotation is less than ``overlap_s``
        seconds old (settings.callback_secret_overlap_s).  Creates the secret if new."""
        await self.secret(project)
        row = await self.pool.fetchrow(
            "SELECT callback_secret, CASE WHEN rotated_at > now() - make_interval(secs => $2)"
            " THEN previous_secret END AS previous FROM project_secrets WHERE project = $1",
            project, float(overlap_s))
        return [row["callback_secret"]] + ([row["previous"]] if row["previous"] else [])

    async def rotate_secret(self, project: str) -> tuple[str, datetime]:
        """Make a new random secret current; the old one becomes ``previous_secret``
        (signed with too, until the overlap ends).  A second rotation inside the
        overlap drops the oldest secret.  Returns ``(new secret, rotated_at)``."""
        await self.secret(project)
        row = await self.pool.fetchrow(
            "UPDATE project_secrets SET previous_secret = callback_secret, callback_secret = $2,"
            " rotated_at = now() WHERE project = $1 RETURNING callback_secret, rotated_at",
            project, secrets.token_hex(32))
        return row["callback_secret"], row["rotated_at"]

    async def enqueue(self, *, document_id: str, version: int, status: str, project: str,
                      url: str, body: bytes) -> bool:
        """Queue one callback; False when this (document, version, status) already has
        one (a redelivered or replayed status event)."""
        row = await self.pool.fetchval(
            "INSERT INTO callbacks (idempotency_key, document_id, version, status, project, url, body)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING 1",
            idempotency_key(document_id, version, status), document_id, version, status,
            project, url, body)
        return row is not None

    async def get(self, key: str) -> Optional[dict[str, Any]]:
        """One outbox row by idempotency key, or None."""
        row = await self.pool.fetchrow("SELECT * FROM callbacks WHERE idempotency_key = $1", key)
        return dict(row) if row else None

    async def for_document(self, document_id: str) -> list[dict[str, Any]]:
        """A document's callbacks, oldest first (without bodies)."""
        rows = await self.pool.fetch(
            "SELECT idempotency_key, version, status, url, state, attempts, last_code, reason,"
            " created_at, delivered_at FROM callbacks WHERE document_id = $1 ORDER BY created_at",
            document_id)
        return [dict(r) for r in rows]

    async def due(self, limit: int = 100) -> list[str]:
        """Keys of pending callbacks whose next attempt is due and that no live
        process holds (lease expired or never taken)."""
        rows = await self.pool.fetch(
            "SELECT idempotency_key FROM callbacks WHERE state = 'pending' AND next_attempt_at <= now()"
            " AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $1)"
            " ORDER BY next_attempt_at LIMIT $2", self.owner, limit)
        return [r["idempotency_key"] for r in rows]

    async def claim(self, key: str, lease_s: float) -> Optional[dict[str, Any]]:
        """Take the lease on a pending callback for one attempt (attempts + 1);
        None when it is not pending or another process holds it."""
        row = await self.pool.fetchrow(
            "UPDATE callbacks SET lease_owner = $2, lease_until = now() + make_interval(secs => $3),"
            " attempts = attempts + 1, updated_at = now() WHERE idempotency_key = $1"
            " AND state = 'pending' AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $2)"
            " RETURNING *", key, self.owner, float(lease_s))
        return dict(row) if row else None

    async def retry_later(self, key: str, code: Optional[int], reason: str, wait_s: float,
                          lease_s: float) -> None:
        """Record a retryable failure; keep the lease until the next attempt."""
        await self.pool.execute(
            "UPDATE callbacks SET last_code = $2, reason = $3,"
            " next_attempt_at = now() + make_interval(secs => $4),"
            " lease_until = now() + make_interval(secs => $5), updated_at = now()"
            " WHERE idempotency_key = $1 AND lease_owner = $6",
            key, code, reason, float(wait_s), float(wait_s + lease_s), self.owner)

    async def finish(self, key: str, state: str, code: Optional[int], reason: Optional[str]) -> None:
        """Close a callback as ``delivered``, ``refused`` or ``failed``."""
        await self.pool.execute(
            "UPDATE callbacks SET state = $2, last_code = $3, reason = $4, lease_until = NULL,"
            " updated_at = now(), delivered_at = CASE WHEN $2 = 'delivered' THEN now() END"
            " WHERE idempotency_key = $1", key, state, code, reason)
        CALLBACKS_TOTAL.labels(state).inc()

    async def release(self) -> int:
        """Give up this process's leases on pending callbacks (a worker stopping), so
        the next notify worker resumes them at once instead of after the lease;
        returns how many were released."""
        result = await self.pool.execute(
            "UPDATE callbacks SET lease_owner = NULL, lease_until = NULL"
            " WHERE state = 'pending' AND lease_owner = $1", self.owner)
        return int(result.split()[-1])

    async def counts(self) -> dict[str, int]:
        """Number of callbacks per state."""
        rows = await self.pool.fetch("SELECT state, count(*) AS n FROM callbacks GROUP BY state")
        return {r["state"]: r["n"] for r in rows}


async def _read_capped(resp: httpx.Response, limit: int) -> bytes:
    """At most about ``limit`` bytes of the body (one network read past it at most:
    httpcore reads 64 KiB at a time); the rest is never read."""
    got = bytearray()
    async for chunk in resp.aiter_raw():
        got += chunk
        if len(got) >= limit:
            break
    return bytes(got[:limit])


async def attempt_once(client: httpx.AsyncClient, row: dict[str, Any], secret: str | list[str],
                       deadline_s: float = 10.0) -> int:
    """POST one stored callback; returns the 2xx status code.

    ``secret``: the signing secret(s), current first (one ``v1`` each).  The whole
    attempt (connect, send, response headers and up to ``RESPONSE_READ_MAX`` bytes of
    body) must finish within ``deadline_s`` seconds (settings.callback_timeout_s);
    a receiver that trickles bytes is cut off there.  Raises CallbackRefused (address
    not allowed), RetryableDelivery (408/425/429/5xx, deadline, connection errors)
    or PermanentDelivery (other non-2xx).
    """
    body = bytes(row["body"])
    check_url_syntax(row["url"])
    request = client.build_request("POST", row["url"], content=body, headers={
        "Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body),
        IDEMPOTENCY_HEADER: row["idempotency_key"], "X-Ragstream-Attempt": str(row["attempts"])})
    try:
        async with asyncio.timeout(deadline_s):
            resp = await client.send(request, stream=True)
            try:
                answer = await _read_capped(resp, RESPONSE_READ_MAX)
            finally:
                await resp.aclose()
    except CallbackRefused:
        raise
    except TimeoutError as exc:
        CALLBACK_ATTEMPTS.labels("error").inc()
        raise RetryableDelivery(f"no complete answer within the {deadline_s:g} s deadline") from exc
    except httpx.HTTPError as exc:
        CALLBACK_ATTEMPTS.labels("error").inc()
        raise RetryableDelivery(f"{type(exc).__name__}: {exc}") from exc
    code = resp.status_code
    CALLBACK_ATTEMPTS.labels(f"{code // 100}xx").inc()
    if 200 <= code < 300:
        return code
    said = answer[:200].decode("utf-8", "replace").strip()
    reason = f"receiver answered {code}" + (f": {said}" if said else "")
    if code in RETRYABLE_CODES:
        raise RetryableDelivery(reason, code)
    raise PermanentDelivery(reason, code)


async def deliver(callbacks: Callbacks, client: httpx.AsyncClient, key: str, *,
                  max_attempts: int, backoff_s: float, backoff_max_s: float,
                  timeout_s: float, secret_overlap_s: float = 86400.0) -> Optional[str]:
    """Deliver one queued callback with retries; returns its final state
    (``delivered``, ``refused``, ``failed``) or None when another process holds it
    or it was already closed.

    Backoff: ``backoff_s * 2**n`` seconds, capped at ``backoff_max_s``, for at most
    ``max_attempts`` attempts in total (counted in the table across restarts);
    ``timeout_s`` is each attempt's total deadline; ``secret_overlap_s`` how long
    after a rotation the previous secret still signs too.
    """
    row = await callbacks.get(key)
    if row is None or row["state"] != "pending":
        return None
    signing = await callbacks.signing_secrets(row["project"], secret_overlap_s)
    remaining = max(1, max_attempts - row["attempts"])
    lease_s = timeout_s + 30.0
    last_code: Optional[int] = None
    state, reason = "failed", ""

    async def _sleep_hook(retry_state) -> None:
        exc = retry_state.outcome.exception()
        await callbacks.retry_later(key, getattr(exc, "code", None), str(exc),
                                    retry_state.next_action.sleep, lease_s)

    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(remaining),
            wait=wait_exponential(multiplier=backoff_s, max=backoff_max_s),
            retry=retry_if_exception_type(RetryableDelivery), reraise=True,
            before_sleep=_sleep_hook,
        ):
            with attempt:
                claimed = await callbacks.claim(key, lease_s)
                if claimed is None:
                    return None
                last_code = await attempt_once(client, claimed, signing, timeout_s)
        state, reason = "delivered", None
    except CallbackRefused as exc:
        state, reason = "refused", exc.reason
    except RetryableDelivery as exc:
        state, last_code = "failed", exc.code
        reason = f"gave up after {max_attempts} attempts: {exc.reason}"
    except PermanentDelivery as exc:
        state, last_code, reason = "failed", exc.code, exc.reason
    await callbacks.finish(key, state, last_code, reason)
    level = logging.INFO if state == "delivered" else logging.WARNING
    log.log(level, "callback %s to %s: %s%s", key, redact_url(row["url"]), state,
            f" ({reason})" if reason else "")
    return state
