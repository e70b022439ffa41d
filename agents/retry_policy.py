"""The one retry policy of every stage: which errors wait and which fail.

- **Transient** (:func:`is_transient`): a dependency is down or overloaded — broker,
  S3, PostgreSQL (incl. pool acquire timeouts), Milvus, Triton, the converter.
  Retried with exponential backoff (0.5 s doubling to 30 s) until the document's
  deadline (``settings.document_deadline_s``, default 3600 s); then the document
  FAILS "timeout after N s".  A transient outage therefore never fails a document
  early: lag grows while the dependency is away (issue 8, failure 9).
- **Permanent**: a DocumentError (bad bytes, unsupported, too large, a parse
  deadline), an undecodable record: fails at once.  A crashed parser process
  counts as unexpected (a kill from outside heals; a file that crashes the parser
  every time fails after the third try).
- **Unexpected** (anything else, i.e. a bug or an unknown library error): retried
  ``UNEXPECTED_ATTEMPTS`` times, then permanent.
- ``asyncio.CancelledError`` (shutdown, rebalance) is never retried nor turned into
  a failure: it propagates, and the uncommitted event is redelivered.
"""
from __future__ import annotations

import asyncio
import errno
import socket
from typing import Optional

import asyncpg
import httpx
from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from stages.errors import DocumentError
from stages.pool import StageTimeout, WorkerCrashed

UNEXPECTED_ATTEMPTS = 3
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0

_TRANSIENT_TEXT = ("unavailable", "fail connecting", "connection refused", "connection reset",
                   "deadline exceeded", "too_many_pings", "server unavailable", "broken pipe",
                   "timed out", "connect call failed", "connection closed", "not ready",
                   # Triton while it (re)loads its models: NOT_FOUND "unknown model …
                   # has no available versions" — a restart, not a missing model
                   "has no available versions")


_TRANSIENT_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.EHOSTUNREACH,
                     errno.ENETUNREACH, errno.EPIPE, errno.ETIMEDOUT}


# every one a hard dependency (pyproject.toml): no optional imports
TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    # not OSError as a whole: "Is a directory" or "File name too long" never heal
    ConnectionError, TimeoutError, socket.gaierror,
    asyncpg.exceptions.PostgresConnectionError, asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.TooManyConnectionsError, asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.OperatorInterventionError,
    BotoConnectionError, HTTPClientError, httpx.TransportError,
    KafkaConnectionError, KafkaTimeoutError,
)


def classify(exc: BaseException) -> str:
    """``"transient"``, ``"permanent"`` or ``"unexpected"`` (see the module docstring).

    Raises nothing; CancelledError is the caller's to re-raise before asking.
    """
    if isinstance(exc, (DocumentError, StageTimeout)):
        return "permanent"
    if isinstance(exc, WorkerCrashed):
        return "unexpected"  # tried UNEXPECTED_ATTEMPTS times: a kill from outside heals
    if isinstance(exc, TRANSIENT_TYPES):
        return "transient"
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return "transient"
    if isinstance(exc, KafkaError) and getattr(exc, "retriable", False):
        return "transient"
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if status >= 500 or code in ("SlowDown", "ServiceUnavailable", "InternalError",
                                     "RequestTimeout"):
            return "transient"
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(t in text for t in _TRANSIENT_TEXT):
        return "transient"  # gRPC UNAVAILABLE (Milvus, Triton) and friends
    return "unexpected"


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` means "a dependency is away: wait and try again"."""
    return classify(exc) == "transient"


def backoff_s(attempt: int) -> float:
    """Delay before retry number ``attempt`` (1-based): 0.5 s doubling, capped at 30 s."""
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * (2 ** max(0, attempt - 1)))


class RetryState:
    """Book-keeping of one event's attempts against its deadline.

    ``deadline_s``: seconds from the first attempt after which a transient error
    fails the document (None: never — the projection and notify stages).
    """

    def __init__(self, deadline_s: Optional[float]):
        self.deadline_s = deadline_s
        self.started = asyncio.get_running_loop().time()
        self.attempts = 0
        self.unexpected = 0

    def elapsed(self) -> float:
        """Seconds since the first attempt."""
        return asyncio.get_running_loop().time() - self.started

    def next_delay(self, exc: BaseException) -> Optional[float]:
        """Seconds to wait before the next attempt, or None when ``exc`` must fail
        the event now (permanent, unexpected too often, or past the deadline)."""
        kind = classify(exc)
        if kind == "permanent":
            return None
        if kind == "unexpected":
            self.unexpected += 1
            if self.unexpected >= UNEXPECTED_ATTEMPTS:
                return None
        delay = backoff_s(self.attempts)
        if self.deadline_s is not None and self.elapsed() + delay > self.deadline_s:
            return None
        return delay
