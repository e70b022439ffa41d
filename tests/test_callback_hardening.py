"""Callbacks against hostile or careless receivers, replay and key rotation (issue 23,
item 9; item 11 for the URL in logs).

Real receivers on 127.0.0.1 (asyncio servers written byte by byte, so they can
trickle or flood), allow-listed by CIDR.  The rotation and delivery tests run
against the test stack's PostgreSQL only, in a schema of their own.
"""
from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import asyncpg
import pytest

from adapters.callbacks import (AllowList, Callbacks, RetryableDelivery, attempt_once, deliver,
                                guarded_client, redact_url)
from adapters.callback_signature import SIGNATURE_HEADER, parse_signature, sign, verify_signature
from adapters.migrations import upgrade_head
from api_helpers import Receiver
from tests.conftest import run
from tests.test_migrations import pg, schema_dsn  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = AllowList.parse("127.0.0.0/8")
BODY = b'{"event": "document.completed"}'


def _row(url: str) -> dict:
    return {"url": url, "body": BODY, "idempotency_key": "d:v1:COMPLETED", "attempts": 1}


async def _serve(handler) -> tuple[asyncio.AbstractServer, str]:
    """A raw HTTP server on 127.0.0.1: ``handler(reader, writer)`` after the request
    head is read.  Returns the server and its URL."""
    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook?token=t0ken"


# -- signature -------------------------------------------------------------------------
def test_signature_is_timestamped_and_a_replay_is_refused():
    header = sign("s3cret", BODY, t=1_700_000_000)
    t, v1 = parse_signature(header)
    assert header.startswith("t=1700000000,v1=") and t == 1_700_000_000 and len(v1) == 1
    assert verify_signature(header, BODY, "s3cret", tolerance_s=300, now=1_700_000_299)
    assert not verify_signature(header, BODY, "s3cret", tolerance_s=300, now=1_700_000_301)  # replayed later
    assert not verify_signature(header, BODY, "s3cret", tolerance_s=300, now=1_699_999_699)  # from the future
    assert not verify_signature(header.replace("t=1700000000", "t=1700000100"), BODY, "s3cret",
                                now=1_700_000_100)  # t is signed: moving it breaks the signature
    assert not verify_signature(header, BODY + b" ", "s3cret", now=1_700_000_000)
    assert not verify_signature(header, BODY, "other", now=1_700_000_000)
    for bad in (None, "", "sha256=abc", "v1=abc", "t=x,v1=abc", f"t={t}"):
        assert not verify_signature(bad, BODY, "s3cret", now=t)
    now = sign("s3cret", BODY)  # default t: the current time
    assert verify_signature(now, BODY, "s3cret")


def test_two_secrets_give_two_v1_entries_either_verifies():
    header = sign(["new", "old"], BODY, t=1000)
    assert header.count("v1=") == 2 and header.split(",")[1] == sign("new", BODY, t=1000).split(",")[1]
    assert verify_signature(header, BODY, "new", now=1000) and verify_signature(header, BODY, "old", now=1000)
    assert not verify_signature(header, BODY, "neither", now=1000)
    with pytest.raises(ValueError, match="at least one secret"):
        sign([], BODY)


# -- deadline and response size ----------------------------------------------------------
@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_trickling_receiver_is_cut_off_at_the_deadline(where):
    """One byte every 0.2 s: each read succeeds within httpx's read timeout, so only a
    total deadline ends the attempt (before: it never ended)."""
    async def trickle(_reader, writer):
        head = b"HTTP/1.1 200 OK\r\n" if where == "headers" else \
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"
        writer.write(head)
        while True:
            writer.write(b"a")
            await writer.drain()
            await asyncio.sleep(0.2)

    async def scenario():
        server, url = await _serve(trickle)
        try:
            async with guarded_client(LOOPBACK, 1.0) as client:
                start = time.monotonic()
                with pytest.raises(RetryableDelivery, match="deadline") as caught:
                    await asyncio.wait_for(attempt_once(client, _row(url), "s", deadline_s=1.5), 15)
                return time.monotonic() - start, caught.value
        finally:
            server.close()

    elapsed, exc = run(scenario())
    assert 1.4 < elapsed < 3.0, elapsed


def test_a_huge_answer_is_not_read():
    """A 200 with a 256 MiB body: the attempt succeeds after reading a few KiB;
    memory stays flat (before: the whole body was buffered)."""
    size = 256 * 1024 * 1024
    sent = {"bytes": 0}
    chunk = b"\0" * 65536

    async def flood(_reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        while sent["bytes"] < size:
            writer.write(chunk)
            await writer.drain()
            sent["bytes"] += len(chunk)

    async def scenario():
        server, url = await _serve(flood)
        try:
            async with guarded_client(LOOPBACK, 5.0) as client:
                tracemalloc.start()
                try:
                    start = time.monotonic()
                    code = await asyncio.wait_for(attempt_once(client, _row(url), "s", deadline_s=5.0), 30)
                    elapsed = time.monotonic() - start
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                await asyncio.sleep(0.2)  # the server notices the closed connection
                return code, elapsed, peak
        finally:
            server.close()

    code, elapsed, peak = run(scenario())
    print(f"huge answer: {elapsed * 1000:.0f} ms, peak {peak / 1024:.0f} KiB traced, "
          f"{sent['bytes'] / 1024:.0f} KiB sent before the close")
    assert code == 200 and elapsed < 2.0
    assert peak < 4 * 1024 * 1024, f"{peak} bytes traced while reading the answer"
    assert sent["bytes"] < 64 * 1024 * 1024


def test_an_error_answer_is_quoted_short():
    async def fail(_reader, writer):
        writer.write(b"HTTP/1.1 503 Busy\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000)
        await writer.drain()

    async def scenario():
        server, url = await _serve(fail)
        try:
            async with guarded_client(LOOPBACK, 5.0) as client:
                with pytest.raises(RetryableDelivery) as caught:
                    await attempt_once(client, _row(url), "s", deadline_s=5.0)
                return caught.value
        finally:
            server.close()

    exc = run(scenario())
    assert exc.code == 503 and exc.reason.startswith("receiver answered 503: xxx") and len(exc.reason) < 250


# -- the URL in logs -------------------------------------------------------------------------
def test_redact_url_keeps_no_token():
    assert redact_url("https://user:pw@hooks.example.com:8443/cb/x?token=abc#frag") == \
        "https://***@hooks.example.com:8443/cb/x?***#***"
    assert redact_url("http://[2606:4700::1]/cb") == "http://[2606:4700::1]/cb"
    assert redact_url("http://h:99999/") == "<malformed URL>"


# -- rotation, end to end through the outbox --------------------------------------------
async def _outbox(dsn: str):
    await upgrade_head(dsn)
    return await asyncpg.create_pool(dsn, min_size=1, max_size=2)


def test_rotation_signs_with_both_secrets_for_the_overlap_then_the_new_one(schema_dsn, caplog):
    """``apikey secret --rotate`` (the CLI, in a subprocess): the new secret is printed
    and becomes current; a callback delivered during the overlap verifies with the
    old secret and with the new one; after the overlap, only with the new one.  The
    delivery log line names the URL without its token."""
    async def setup():
        pool = await _outbox(schema_dsn)
        try:
            return await Callbacks(pool).secret("rot")
        finally:
            await pool.close()

    old = run(setup())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAGSTREAM_PG_DSN": schema_dsn}
    out = subprocess.run([sys.executable, "-c", "from cli.main import main; main()",
                          "apikey", "secret", "-p", "rot", "--rotate"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    new = out.stdout.strip().splitlines()[-1]
    assert len(new) == 64 and new != old and "previous secret until" in out.stdout
    receiver = Receiver(secret=new, fail_first=False)

    async def deliver_one(doc: str, overlap_s: float) -> tuple[str, list[str]]:
        pool = await asyncpg.create_pool(schema_dsn, min_size=1, max_size=2)
        try:
            cb = Callbacks(pool)
            assert await cb.signing_secrets("rot", overlap_s) == ([new, old] if overlap_s else [new])
            await cb.enqueue(document_id=doc, version=1, status="COMPLETED", project="rot",
                             url=receiver.url("127.0.0.1") + "?token=t0ken", body=BODY)
            async with guarded_client(LOOPBACK, 5.0) as client:
                state = await deliver(cb, client, f"{doc}:v1:COMPLETED", max_attempts=1, backoff_s=0.1,
                                      backoff_max_s=0.1, timeout_s=5.0, secret_overlap_s=overlap_s)
            return state, receiver.attempts[-1]["signature"]
        finally:
            await pool.close()

    try:
        with caplog.at_level(logging.INFO, logger="adapters.callbacks"):
            state, header = run(deliver_one("in-overlap", 3600.0))
        assert state == "delivered" and header.count("v1=") == 2
        assert verify_signature(header, BODY, old) and verify_signature(header, BODY, new)
        state, header = run(deliver_one("after-overlap", 0.0))
        assert header.count("v1=") == 1
        assert verify_signature(header, BODY, new) and not verify_signature(header, BODY, old)
    finally:
        receiver.close()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "in-overlap" in logged and "t0ken" not in logged and "/hook?***" in logged
