"""Schema migrations of the ragstream database (Alembic, raw SQL revisions).

Owns every table of the PostgreSQL database: the document registry and status
projection (adapters/metadata.py), the delivery ledger (adapters/version_ledger.py),
API keys, callbacks and category profiles.  The revisions live in ``versions/``
(one file each, plain ``op.execute`` SQL: the code talks to PostgreSQL through
asyncpg, there are no SQLAlchemy models); ``env.py`` runs them on the connection
that :func:`upgrade_head` hands it.  Imports nothing of ours.

:func:`upgrade_head` is the one place the schema is brought up to date: the API,
every worker, ``ragstream ingest|status|profiles|apikey``, ``dev up`` and the tests
call it at start-up (``ragstream db upgrade`` by hand).  Two processes starting at
once do not race: the whole upgrade runs in one transaction holding a
transaction-scoped advisory lock (:data:`LOCK_KEY`), so the second waits, then finds
the database at head and does nothing.

A database created before Alembic (tables made by the old hand-written
``migrate()`` functions, no ``alembic_version`` table) upgrades cleanly: the
baseline revision is idempotent (``IF NOT EXISTS`` throughout).

New revision: ``ragstream db revision "what it does"`` writes
``versions/<id>_<slug>.py``; fill in ``upgrade()``/``downgrade()`` with SQL.
"""
from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import Optional

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

HERE = Path(__file__).resolve().parent
# pg_advisory_xact_lock key held while upgrading (the old migrate() used 727001-727003)
LOCK_KEY = 727000
CONNECT_TIMEOUT_S = 10.0

# Alembic keeps the running migration in module-level proxies (alembic.context,
# alembic.op), so two upgrades must not interleave in one thread either: callers
# on one event loop take turns (different processes wait on the advisory lock)
_loop_locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = \
    weakref.WeakKeyDictionary()


def _in_process_lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _loop_locks.get(loop)
    if lock is None:
        lock = _loop_locks[loop] = asyncio.Lock()
    return lock


def alembic_config() -> Config:
    """The Alembic configuration: ``script_location`` is this package (no alembic.ini)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    return cfg


def head_revision() -> str:
    """The newest revision id in ``versions/`` (e.g. ``"0002_error_code"``)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no revisions in adapters/migrations/versions"
    return head


def _engine(dsn: str) -> AsyncEngine:
    """A one-connection SQLAlchemy engine over asyncpg that connects with ``dsn``
    exactly as asyncpg reads it (query parameters such as ``search_path`` become
    server settings, as in adapters/metadata.py)."""
    async def connect():
        return await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)

    return create_async_engine("postgresql+asyncpg://", async_creator=connect, poolclass=NullPool)


def _current(conn: Connection) -> Optional[str]:
    return MigrationContext.configure(conn).get_current_revision()


def _upgrade(conn: Connection, target: str) -> Optional[str]:
    cfg = alembic_config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, target)
    return _current(conn)


async def upgrade_head(dsn: str, target: str = "head") -> Optional[str]:
    """Upgrade the database at ``dsn`` to ``target`` (default: the newest revision).

    Idempotent and cheap at head (one lock, one read of ``alembic_version``); safe to
    call from several processes at once (advisory lock :data:`LOCK_KEY`, held until
    the one transaction of the upgrade commits) and from several tasks of one
    process (they take turns).

    Args:
        dsn: asyncpg DSN, e.g. ``postgresql://ragstream@127.0.0.1:15432/ragstream``.
        target: an Alembic revision (``"head"``, ``"0001_baseline"``).
    Returns:
        the database's revision afterwards.
    Raises:
        OSError / TimeoutError when PostgreSQL is unreachable (connect timeout
        :data:`CONNECT_TIMEOUT_S` s); the asyncpg error when a statement fails
        (the transaction is rolled back: nothing of that upgrade stays); alembic's
        CommandError for an unknown ``target``.
    """
    async with _in_process_lock():
        engine = _engine(dsn)
        try:
            async with engine.begin() as conn:
                await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({LOCK_KEY})")
                return await conn.run_sync(_upgrade, target)
        except DBAPIError as exc:
            raise _driver_error(exc) from exc
        finally:
            await engine.dispose()


def _driver_error(exc: DBAPIError) -> BaseException:
    """The asyncpg exception under SQLAlchemy's wrapper (what every other adapter
    raises, so agents/retry_policy.py classifies it the same), else ``exc``."""
    driver = getattr(exc.orig, "__cause__", None)
    return driver if isinstance(driver, (asyncpg.PostgresError, asyncpg.InterfaceError)) else exc


async def current_revision(dsn: str) -> Optional[str]:
    """The revision the database at ``dsn`` is at (None: never upgraded by Alembic)."""
    engine = _engine(dsn)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_current)
    except DBAPIError as exc:
        raise _driver_error(exc) from exc
    finally:
        await engine.dispose()
