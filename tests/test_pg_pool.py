"""Every wait on PostgreSQL is bounded (adapters/pg_pool.py), against the test stack's
real PostgreSQL: a pool with no free connection and a statement that runs too long
both raise TimeoutError, which the retry policy calls transient."""
from __future__ import annotations

import asyncio
import logging

import pytest

from adapters import pg_pool
from agents.retry_policy import classify
from tests.conftest import run


def test_acquire_on_an_exhausted_pool_times_out(stack, monkeypatch):
    """max_size 1, the one connection held: a second acquire (and a pool.fetchval,
    which acquires inside) raises TimeoutError after ACQUIRE_TIMEOUT_S, not never."""
    monkeypatch.setattr(pg_pool, "ACQUIRE_TIMEOUT_S", 0.5)

    async def scenario():
        pool = await pg_pool.create_pool(stack.pg_dsn, min_size=1, max_size=1)
        try:
            async with pool.acquire():
                with pytest.raises(TimeoutError) as waited:
                    await pool.fetchval("SELECT 1")
                assert classify(waited.value) == "transient"
            assert await pool.fetchval("SELECT 1") == 1  # released: usable again
        finally:
            await pool.close()

    run(asyncio.wait_for(scenario(), 30))


def test_a_statement_past_the_command_timeout_raises_and_the_pool_recovers(stack, monkeypatch):
    """A statement running past COMMAND_TIMEOUT_S raises TimeoutError (asyncpg cancels
    it on the server); the next statement on the same pool succeeds."""
    monkeypatch.setattr(pg_pool, "COMMAND_TIMEOUT_S", 0.5)

    async def scenario():
        pool = await pg_pool.create_pool(stack.pg_dsn, min_size=1, max_size=1)
        try:
            with pytest.raises(TimeoutError) as waited:
                await pool.execute("SELECT pg_sleep(5)")
            assert classify(waited.value) == "transient"
            assert await pool.fetchval("SELECT 2") == 2
        finally:
            await pool.close()

    run(asyncio.wait_for(scenario(), 30))


def test_floor_reconnect_failures_log_one_line_each(stack, caplog):
    """PostgreSQL away: asyncpg's pool retries its min_size floor in the background and
    logs every failed attempt at warning level with a traceback (a worker left running
    against a stopped stack wrote ~14,000 lines).  Through a TCP relay to the real
    PostgreSQL that is then shut (listener closed, relayed connections cut), the
    pool's reconnect warnings arrive as one line each, ending with the error."""
    host, port = stack.pg_dsn.rsplit("@", 1)[1].split("/", 1)[0].split(":")

    async def scenario():
        cut: list[asyncio.StreamWriter] = []

        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def relay(client_reader, client_writer):
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
            cut.extend([client_writer, server_writer])
            await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

        relay_server = await asyncio.start_server(relay, "127.0.0.1", 0)
        relay_port = relay_server.sockets[0].getsockname()[1]
        dsn = stack.pg_dsn.replace(f"{host}:{port}", f"127.0.0.1:{relay_port}")
        pool = await pg_pool.create_pool(dsn, min_size=1, max_size=1)
        try:
            assert await pool.fetchval("SELECT 1") == 1
            relay_server.close()
            await relay_server.wait_closed()
            for writer in cut:
                writer.close()
            deadline = asyncio.get_running_loop().time() + 20
            while asyncio.get_running_loop().time() < deadline:
                if any(r.name == "asyncpg.pool" for r in caplog.records):
                    break
                await asyncio.sleep(0.2)
        finally:
            pool.terminate()

    with caplog.at_level(logging.WARNING, logger="asyncpg.pool"):
        run(asyncio.wait_for(scenario(), 40))
    warnings = [r for r in caplog.records if r.name == "asyncpg.pool"]
    assert warnings, "the pool logged no reconnect failure"
    for record in warnings:
        assert record.exc_info is None and record.exc_text is None
        line = logging.Formatter().format(record)
        assert "\n" not in line, line
        assert "retrying: " in line and ("Connection" in line or "Errno" in line), line


def test_one_line_filter_keeps_other_records():
    """Errors and exception-free warnings of asyncpg.pool pass unchanged."""
    keep = pg_pool.OneLineRetryWarnings()
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        error = logging.LogRecord("asyncpg.pool", logging.ERROR, __file__, 1, "failed %s", ("x",),
                                  sys.exc_info())
    plain = logging.LogRecord("asyncpg.pool", logging.WARNING, __file__, 1, "slow %d", (3,), None)
    assert keep.filter(error) and error.exc_info is not None and error.getMessage() == "failed x"
    assert keep.filter(plain) and plain.getMessage() == "slow 3"
