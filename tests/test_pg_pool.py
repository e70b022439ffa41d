"""Every wait on PostgreSQL is bounded (adapters/pg_pool.py), against the test stack's
real PostgreSQL: a pool with no free connection and a statement that runs too long
both raise TimeoutError, which the retry policy calls transient."""
from __future__ import annotations

import asyncio

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
