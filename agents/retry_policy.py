"""The one retry policy of every stage: which errors wait and which fail.

- **Transient** (:func:`is_transient`): a dependency is down or overloaded — broker,
  S3, PostgreSQL (incl. pool acquire timeouts), Milvus, Triton, the converter.
  Retried with exponential backoff (0.5 s doubling to 30 s) until the document's
  deadline (``settings.document_deadline_s``, default 3600 s); then the document
  FAILS "timeout after N s".  A transient outage therefore never fails a document
  early: lag grows while the dependency is away (issue 8, failure 9).
- **Permanent**: a DocumentError (bad bytes, unsupported, too large, a parse
  deadline), an undecodable record: fails at once.  A DocumentError marked
  ``permanent=False`` (may pass on a retry: a converter failure or timeout, an I/O
  error) is transient when an outage caused it, else unexpected.  A crashed parser process
  counts as unexpected (a kill from outside heals; a file that crashes the parser
  every time fails after the third try).
- **Unexpected** (anything else, i.e. a bug or an unknown library error): retried
  ``UNEXPECTED_ATTEMPTS`` times, then permanent.
- ``asyncio.CancelledError`` (shutdown, rebalance) is never retried nor turned into
  a failure: it propagates, and the uncommitted event is redelivered.

:func:`stage_retrying` states this policy in tenacity terms (``AsyncRetrying``: a
retry predicate, exponential wait, a deadline stop and an unexpected-error count);
the stage runner (agents/runner.py) runs every event's work under it.  tenacity is
the one retry pattern of the code base (adapters, topics, drills use it too).
"""
from __future__ import annotations

import errno
import logging
import socket
from typing import Any, Awaitable, Callable, Optional, TypeVar

import asyncpg
import httpx
from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from tenacity import (AsyncRetrying, RetryCallState, retry_if_exception, stop_before_delay,
                      stop_never, wait_exponential)
from tenacity.stop import stop_base

from stages.errors import DocumentError
from stages.pool import StageTimeout, WorkerCrashed

log = logging.getLogger(__name__)
T = TypeVar("T")

UNEXPECTED_ATTEMPTS = 3
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0

_TRANSIENT_TEXT = ("unavailable", "fail connecting", "connection refused", "connection reset",
                   "deadline exceeded", "too_many_pings", "server unavailable", "broken pipe",
                   "timed out", "connect call failed", "connection closed", "not ready",
                   # Triton while it (re)loads its models: NOT_FOUND "unknown model …
                   # has no available versions" — a restart, not a missing model
                   "has no available versions",
                   # asyncpg's InternalClientError "cannot switch to state 15; another
                   # operation (2) is in progress", raised by the reset on release of a
                   # connection PostgreSQL's shutdown broke mid-query, with nothing in
                   # its cause chain (CI, tests/test_delivery.py's outage, 2026-12-02:
                   # unexpected, so the partition event was dead-lettered and its
                   # document never finished)
                   "cannot switch to state")


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
    if isinstance(exc, DocumentError) and not exc.permanent:
        # "may pass on a retry" (stages/errors.py: a converter failing or timing out,
        # an I/O error, memory pressure): an outage underneath (the warm converter's
        # connection refused while it restarts) waits like any outage; anything else
        # is retried as unexpected and then fails with its own reason (issue 8,
        # failure 9: this flag used to be ignored, so such errors failed at once)
        return "transient" if _caused_by_transient(exc) else "unexpected"
    if isinstance(exc, (DocumentError, StageTimeout)):
        return "permanent"
    if isinstance(exc, WorkerCrashed):
        return "unexpected"  # tried UNEXPECTED_ATTEMPTS times: a kill from outside heals
    if _transient_type(exc):
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
    if _caused_by_transient(exc):
        # e.g. asyncpg's InternalClientError "cannot switch to state 15; another
        # operation is in progress" raised while a connection was being reset by a
        # PostgreSQL shutdown (ConnectionResetError in its context): the outage, not
        # a bug (seen in tests/test_delivery.py's PostgreSQL outage)
        return "transient"
    return "unexpected"


def _transient_type(exc: BaseException) -> bool:
    """True for a transient exception type (:data:`TRANSIENT_TYPES`) or an OSError
    with a transient errno."""
    return isinstance(exc, TRANSIENT_TYPES) or (isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS)


def _caused_by_transient(exc: BaseException, depth: int = 5) -> bool:
    """True when an exception in ``exc``'s cause/context chain (up to ``depth``
    links) is transient by :func:`classify`'s type, errno or text rules."""
    seen = {id(exc)}
    link = exc.__cause__ or exc.__context__
    while link is not None and depth > 0 and id(link) not in seen:
        if _transient_type(link):
            return True
        seen.add(id(link))
        depth -= 1
        link = link.__cause__ or link.__context__
    return False


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` means "a dependency is away: wait and try again"."""
    return classify(exc) == "transient"


def backoff_s(attempt: int) -> float:
    """Delay before retry number ``attempt`` (1-based): 0.5 s doubling, capped at 30 s
    (what :func:`stage_retrying`'s ``wait_exponential`` computes)."""
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * (2 ** max(0, attempt - 1)))


def _worth_retrying(exc: BaseException) -> bool:
    """Transient or unexpected errors; never permanent ones, never CancelledError
    (nor anything else that is not an Exception)."""
    return isinstance(exc, Exception) and classify(exc) != "permanent"


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, Exception) and classify(exc) == "transient"


class stop_after_unexpected(stop_base):  # noqa: N801 — named like tenacity's stops
    """Stop at the ``attempts``-th unexpected error of one retry run (stateful: a
    fresh instance per run, which :func:`stage_retrying` makes)."""

    def __init__(self, attempts: int):
        self.attempts = attempts
        self.seen = 0

    def __call__(self, retry_state: RetryCallState) -> bool:
        if classify(retry_state.outcome.exception()) == "unexpected":
            self.seen += 1
        return self.seen >= self.attempts


def stage_retrying(deadline_s: Optional[float], *, transient_only: bool = False,
                   before_sleep: Optional[Callable[[RetryCallState], Any]] = None
                   ) -> AsyncRetrying:
    """The retry policy for one event's work, as a fresh tenacity ``AsyncRetrying``.

    Use as ``async for attempt in stage_retrying(...): with attempt: await work()``.

    - retried: transient errors, and unexpected ones until the
      ``UNEXPECTED_ATTEMPTS``-th (``transient_only``: transient errors only, for
      ledger writes, dead letters and status events that must not be lost);
    - wait before retry n (1-based): :func:`backoff_s` = 0.5 s doubling to 30 s;
    - stop: when the next attempt would start past ``deadline_s`` seconds after the
      first (``stop_before_delay``; None: never);
    - what ends the run is re-raised as itself (``reraise``): a permanent error, the
      last error at the deadline or at the unexpected limit, and CancelledError at
      once (never retried).

    Args:
        deadline_s: seconds from the first attempt (None: no deadline).
        transient_only: retry transient errors only, any other raises at once.
        before_sleep: called with tenacity's ``RetryCallState`` before each wait
            (``retry_state.upcoming_sleep`` seconds; logging, metrics).
    """
    stop: stop_base = stop_never if deadline_s is None else stop_before_delay(deadline_s)
    if not transient_only:
        stop = stop_after_unexpected(UNEXPECTED_ATTEMPTS) | stop
    return AsyncRetrying(
        retry=retry_if_exception(_transient if transient_only else _worth_retrying),
        wait=wait_exponential(multiplier=BACKOFF_FIRST_S, exp_base=2, max=BACKOFF_MAX_S),
        stop=stop, before_sleep=before_sleep, reraise=True)


async def retry_transient(call: Callable[[], Awaitable[T]], *, describe: str) -> T:
    """``await call()`` retried while it fails transiently, with no deadline (ledger
    writes, dead letters, status events: what must not be lost); any other error
    raises at once.  Each retry logs a WARNING "<describe>: <error>; retrying in N s"
    (``describe`` names the stage and what is being done)."""
    def log_retry(rs: RetryCallState) -> None:
        log.warning("%s: %s; retrying in %.1f s", describe, rs.outcome.exception(), rs.upcoming_sleep)

    async for attempt in stage_retrying(None, transient_only=True, before_sleep=log_retry):
        with attempt:
            result = await call()
    return result
