"""Completion callbacks: the outbox table, signing, the address guard and delivery.

Tables (PostgreSQL, created by the revisions in adapters/migrations/):

- ``project_secrets`` — one HMAC secret per project (created on first use, shown by
  ``ragstream apikey secret --project P``).
- ``callbacks`` — one row per (document, version, terminal status): the outbox.  Its
  primary key is the idempotency key ``{document_id}:v{version}:{status}``, so a
  redelivered or replayed status event never queues a second callback.  ``state`` is
  ``pending`` → ``delivered`` | ``refused`` (address not allowed) | ``failed``
  (attempts exhausted or a permanent 4xx); ``reason`` says why, ``attempts`` and
  ``last_code`` what happened.  The exact body is stored, so every attempt sends
  (and signs) the same bytes.

Delivery: ``POST`` with ``Content-Type: application/json``,
``X-Ragstream-Signature: sha256=<hex HMAC-SHA256(secret, body)>`` and
``Idempotency-Key``.  2xx → delivered; 408, 425, 429, 5xx and connection errors are
retried with exponential backoff (tenacity) up to a cap; other 4xx fail at once.
Redirects are not followed.

Address guard: every connection resolves the host itself and refuses any address
that is not globally routable (loopback, private, link-local such as
169.254.169.254, CGNAT, multicast, reserved, unspecified), unless the host (or the
address, or a CIDR containing it) is on ``settings.callback_allow_hosts``.  The
check runs inside the connection (a custom network backend), on the addresses
actually dialled, so DNS rebinding between a check and the connect cannot slip
through; proxies from the environment are ignored for the same reason.

Size: one outbox: its tables, signing, the address guard and the delivery loop share
the row states and the retry schedule; split, a reader would follow one callback
through four files.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import secrets
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Optional
from urllib.parse import urlsplit

import asyncpg
import httpcore
import httpx
import orjson
from httpcore._backends.auto import AutoBackend
from prometheus_client import Counter
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from streams.document_ids import local_id

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Ragstream-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRYABLE_CODES = frozenset({408, 425, 429}) | frozenset(range(500, 600))

CALLBACKS_TOTAL = Counter("ragstream_callbacks_total",
                          "Callback outcomes by final state (delivered, refused, failed)", ["state"])
CALLBACK_ATTEMPTS = Counter("ragstream_callback_attempts_total",
                            "Callback HTTP attempts by result (2xx, 4xx, 5xx, error)", ["result"])

class CallbackRefused(Exception):
    """The callback's destination is not allowed; ``reason`` says why (permanent)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RetryableDelivery(Exception):
    """An attempt failed in a way worth retrying (5xx, 429, timeout, connection)."""

    def __init__(self, reason: str, code: Optional[int] = None):
        super().__init__(reason)
        self.reason, self.code = reason, code


class PermanentDelivery(Exception):
    """An attempt failed in a way not worth retrying (e.g. 400, 401, 404, 410)."""

    def __init__(self, reason: str, code: Optional[int] = None):
        super().__init__(reason)
        self.reason, self.code = reason, code


# -- signing ---------------------------------------------------------------------------
def sign(secret: str, body: bytes) -> str:
    """``sha256=`` + hex HMAC-SHA256 of ``body`` under ``secret`` (the header value)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: Optional[str]) -> bool:
    """True when ``header`` is the signature of ``body`` (constant-time compare)."""
    return bool(header) and hmac.compare_digest(sign(secret, body), header)


def idempotency_key(document_id: str, version: int, status: str) -> str:
    """``{document_id}:v{version}:{status}``: one callback per terminal state."""
    return f"{document_id}:v{version}:{status}"


def callback_body(*, document_id: str, project: str, version: int, status: str,
                  output: Optional[dict[str, str]], error: Optional[str], chunks: int,
                  at: float, error_code: Optional[str] = None) -> bytes:
    """The JSON body (bytes) of a callback.  ``at`` is the Unix time (s) of the state;
    ``error`` the human sentence and ``error_code`` the stable code of a FAILED one.
    ``document_id`` is the scoped id; the body carries the project's own id
    (streams/document_ids.py), as the API shows it."""
    return orjson.dumps({
        "event": f"document.{status.lower()}",
        "idempotency_key": idempotency_key(document_id, version, status),
        "document_id": local_id(project, document_id), "project": project, "version": version,
        "status": status,
        "output": output, "chunks": chunks, "error": error, "error_code": error_code,
        "at": datetime.fromtimestamp(at or time.time(), tz=timezone.utc).isoformat(),
        "at_unix": at,
    })


# -- address guard ---------------------------------------------------------------------
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class AllowList:
    """Hosts (lower-case names or literal IPs) and networks that may be non-global."""

    hosts: frozenset[str]
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    @classmethod
    def parse(cls, spec: str | Iterable[str]) -> "AllowList":
        """From ``"localhost, 10.0.0.0/8, hooks.internal"`` (or a list of items)."""
        items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
        hosts, nets = set(), []
        for item in filter(None, items):
            try:
                nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(nets))

    def allows(self, host: str, ip: IPAddress) -> bool:
        """True when ``host`` is listed or ``ip`` lies in a listed network."""
        return host.lower().rstrip(".") in self.hosts or any(ip in n for n in self.networks)


def address_problem(ip: IPAddress) -> Optional[str]:
    """Why ``ip`` may not receive callbacks (``"loopback"``, ``"link-local"``, …), or
    None for a globally routable unicast address."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for attr, label in (("is_loopback", "loopback"), ("is_link_local", "link-local"),
                        ("is_unspecified", "unspecified"), ("is_multicast", "multicast"),
                        ("is_private", "private"), ("is_reserved", "reserved")):
        if getattr(ip, attr):
            return label
    if not ip.is_global:
        return "not globally routable"
    return None


def check_url_syntax(url: str) -> str:
    """Validate a callback URL's form; returns it.  Raises CallbackRefused for a
    scheme other than http/https, a missing host, or more than 2048 characters."""
    if len(url) > 2048:
        raise CallbackRefused("callback URL longer than 2048 characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 — raises ValueError for a bad port
    except ValueError as exc:
        raise CallbackRefused(f"malformed callback URL: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise CallbackRefused(f"callback URL scheme {parts.scheme!r} is not http or https")
    if not parts.hostname:
        raise CallbackRefused("callback URL has no host")
    return url


async def resolve_allowed(host: str, port: int, allow: AllowList) -> list[str]:
    """Resolve ``host`` and return the addresses a callback may dial (in resolver
    order).  Raises CallbackRefused when any resolved address is not allowed (a host
    that resolves to one public and one private address is refused whole), and
    RetryableDelivery when the name does not resolve."""
    try:
        ips = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise RetryableDelivery(f"cannot resolve {host}: {exc}") from exc
        ips = list(dict.fromkeys(ipaddress.ip_address(i[4][0].split("%")[0]) for i in infos))
    for ip in ips:
        problem = address_problem(ip)
        if problem and not allow.allows(host, ip):
            raise CallbackRefused(
                f"callback host {host} resolves to {ip}, a {problem} address; refused "
                f"(allow it with RAGSTREAM_CALLBACK_ALLOW_HOSTS)")
    return [str(ip) for ip in ips]


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore network backend that dials only addresses the allow-list permits.

    TLS still verifies the certificate against the URL's host name (httpcore passes
    the origin host as SNI), so pinning the dialled IP keeps HTTPS intact.
    """

    def __init__(self, allow: AllowList):
        self.allow = allow
        self._inner = AutoBackend()

    async def connect_tcp(self, host: str, port: int, timeout: Optional[float] = None,
                          local_address: Optional[str] = None, socket_options=None):
        """Resolve, check every address, dial the first allowed one that answers.
        Raises CallbackRefused or httpcore.ConnectError."""
        addresses = await resolve_allowed(host, port, self.allow)
        last: Optional[Exception] = None
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(ip, port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                last = exc
        raise httpcore.ConnectError(f"cannot connect to {host}:{port}: {last}")

    async def connect_unix_socket(self, *args, **kwargs):
        """Never: callbacks go over TCP only.  Raises CallbackRefused."""
        raise CallbackRefused("Unix sockets are not callback destinations")

    async def sleep(self, seconds: float) -> None:
        """Sleep (used by httpcore's retries)."""
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx transport whose connection pool dials through :class:`GuardedBackend`."""

    def __init__(self, allow: AllowList, **kwargs: Any):
        super().__init__(trust_env=False, **kwargs)
        # httpx builds its httpcore pool privately; swap in one with the guard.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(), max_connections=50,
            max_keepalive_connections=10, keepalive_expiry=5.0,
            network_backend=GuardedBackend(allow))


def guarded_client(allow: AllowList, timeout_s: float) -> httpx.AsyncClient:
    """An httpx client for callbacks: guarded dialling, no redirects, no env proxies."""
    return httpx.AsyncClient(transport=GuardedTransport(allow), timeout=timeout_s,
                             follow_redirects=False, trust_env=False,
                             headers={"User-Agent": "ragstream-notifier/0.1"})


# -- outbox ----------------------------------------------------------------------------
class Callbacks:
    """The ``callbacks`` outbox and ``project_secrets`` over an asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool):
        self.pool = pool
        self.owner = uuid.uuid4().hex[:12]  # lease owner: this process

    async def secret(self, project: str) -> str:
        """The project's HMAC secret, created (random 32 bytes, hex) on first use."""
        await self.pool.execute(
            "INSERT INTO project_secrets (project, callback_secret) VALUES ($1, $2) "
            "ON CONFLICT DO NOTHING", project, secrets.token_hex(32))
        return await self.pool.fetchval(
            "SELECT callback_secret FROM project_secrets WHERE project = $1", project)

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


async def attempt_once(client: httpx.AsyncClient, row: dict[str, Any], secret: str) -> int:
    """POST one stored callback; returns the 2xx status code.

    Raises CallbackRefused (address not allowed), RetryableDelivery (408/425/429/5xx,
    timeouts, connection errors) or PermanentDelivery (other non-2xx).
    """
    body = bytes(row["body"])
    check_url_syntax(row["url"])
    try:
        resp = await client.post(row["url"], content=body, headers={
            "Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body),
            IDEMPOTENCY_HEADER: row["idempotency_key"],
            "X-Ragstream-Attempt": str(row["attempts"])})
    except CallbackRefused:
        raise
    except httpx.HTTPError as exc:
        CALLBACK_ATTEMPTS.labels("error").inc()
        raise RetryableDelivery(f"{type(exc).__name__}: {exc}") from exc
    code = resp.status_code
    CALLBACK_ATTEMPTS.labels(f"{code // 100}xx").inc()
    if 200 <= code < 300:
        return code
    if code in RETRYABLE_CODES:
        raise RetryableDelivery(f"receiver answered {code}", code)
    raise PermanentDelivery(f"receiver answered {code}", code)


async def deliver(callbacks: Callbacks, client: httpx.AsyncClient, key: str, *,
                  max_attempts: int, backoff_s: float, backoff_max_s: float,
                  timeout_s: float) -> Optional[str]:
    """Deliver one queued callback with retries; returns its final state
    (``delivered``, ``refused``, ``failed``) or None when another process holds it
    or it was already closed.

    Backoff: ``backoff_s * 2**n`` seconds, capped at ``backoff_max_s``, for at most
    ``max_attempts`` attempts in total (counted in the table across restarts).
    """
    row = await callbacks.get(key)
    if row is None or row["state"] != "pending":
        return None
    secret = await callbacks.secret(row["project"])
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
                last_code = await attempt_once(client, claimed, secret)
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
    log.log(level, "callback %s to %s: %s%s", key, row["url"], state, f" ({reason})" if reason else "")
    return state
