"""The one way this code base opens an asyncpg pool: every wait on PostgreSQL is bounded.

asyncpg's defaults wait forever in three places, and a PostgreSQL restart can leave a
pooled connection half-torn-down so that one of them never returns (issue 8: a stage
stopped for good after a restart, its last log a connection-refused retry, with only
idle server sessions):

- ``Pool.acquire()`` without ``timeout`` waits on the pool's queue forever (every
  ``pool.fetch``/``execute`` convenience method acquires this way);
- a query without ``timeout`` on a connection without ``command_timeout`` waits for
  the server forever, and so does the cancel request sent when one is interrupted;
- ``release`` resets the connection with the acquire's timeout, i.e. none.

:func:`create_pool` closes all three: a default acquire timeout
(:data:`ACQUIRE_TIMEOUT_S`, also the reset budget on release) and a
``command_timeout`` (:data:`COMMAND_TIMEOUT_S`).  Either one expiring raises
``TimeoutError``, which the retry policy (agents/retry_policy.py) treats as transient,
so the work waits and retries instead of hanging.  No query of ours runs anywhere near
these limits (the slowest, a migration, uses its own connection).

While PostgreSQL is away, asyncpg's pool keeps reconnecting its ``min_size`` floor in
the background (1 s doubling to 60 s between attempts) and logs each failed attempt at
warning level *with its traceback*: a worker left running against a stopped stack wrote
about 14,000 lines of them (a newcomer run, 2026-12-03).  :class:`OneLineRetryWarnings`,
installed on the ``asyncpg.pool`` logger by this module, turns each into one line that
ends with the error (``...; retrying: ConnectionRefusedError: [Errno 111] ...``).
"""
from __future__ import annotations

import inspect
import logging
from typing import Optional

import asyncpg
from asyncpg.pool import Pool

ACQUIRE_TIMEOUT_S = 30.0  # a free connection, or a new one (connect timeout below)
COMMAND_TIMEOUT_S = 60.0  # one statement, incl. waiting on an advisory lock
CONNECT_TIMEOUT_S = 10.0  # TCP + startup of one new connection


# asyncpg.create_pool has no pool-class argument, so create_pool below builds the
# Pool itself, with create_pool's own defaults read from its signature (an asyncpg
# upgrade that changes them carries over)
_CREATE_POOL_DEFAULTS = {
    name: p.default for name, p in inspect.signature(asyncpg.create_pool).parameters.items()
    if p.default is not inspect.Parameter.empty and name != "dsn"}


class OneLineRetryWarnings(logging.Filter):
    """A logging filter for the ``asyncpg.pool`` logger: a warning that carries a
    traceback (the background reconnect of the pool's connection floor) keeps its
    message with ``: <ExceptionType>: <text>`` appended and loses the traceback.
    Errors and records without an exception pass unchanged; nothing is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always True; rewrites ``record`` in place when it is a warning with exc_info."""
        if record.levelno == logging.WARNING and record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


_ONE_LINE = OneLineRetryWarnings()
if not any(isinstance(f, OneLineRetryWarnings) for f in logging.getLogger("asyncpg.pool").filters):
    logging.getLogger("asyncpg.pool").addFilter(_ONE_LINE)


class BoundedPool(Pool):
    """An asyncpg ``Pool`` whose ``acquire()`` defaults to :data:`ACQUIRE_TIMEOUT_S`.

    Raises ``TimeoutError`` (asyncio's) when no connection is free in time.
    """

    def acquire(self, *, timeout: Optional[float] = None):
        """Like ``Pool.acquire``, with ``timeout`` (seconds) defaulting to ACQUIRE_TIMEOUT_S."""
        return super().acquire(timeout=ACQUIRE_TIMEOUT_S if timeout is None else timeout)


async def create_pool(dsn: str, *, min_size: int, max_size: int) -> asyncpg.Pool:
    """An initialised :class:`BoundedPool` over ``dsn`` with ``min_size``..``max_size``
    connections, command timeout COMMAND_TIMEOUT_S and connect timeout CONNECT_TIMEOUT_S.

    Raises what ``asyncpg.create_pool`` raises when PostgreSQL is unreachable
    (``OSError``, ``asyncpg.PostgresError``, ``TimeoutError``).
    """
    options = {**_CREATE_POOL_DEFAULTS, "min_size": min_size, "max_size": max_size}
    pool = BoundedPool(dsn, **options, timeout=CONNECT_TIMEOUT_S, command_timeout=COMMAND_TIMEOUT_S)
    return await pool
