"""Issue 23, item 11: the small ones.

- ``/readyz`` (unauthenticated) uses the app's clients and answers a flood from one
  round of checks (before: a Kafka admin client and a Milvus client per request);
- SSE frames leave the callback URL out (it often carries a token);
- ``ApiKeys.verify`` compares the hash before it writes ``last_used_at``;
- ``ragstream ingest`` refuses a bad ``--category`` / ``--document-id`` (exit 2)
  before touching anything.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import httpx
import pytest

from adapters.api_keys import ApiKeys
from adapters.migrations import upgrade_head
from api.sse import frame
from schemas import DocumentStatus, status_event
from tests.conftest import run
from tests.test_migrations import pg, schema_dsn  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
TOKEN_URL = "https://hooks.example.com/cb?token=s3cr3t-t0ken"


def test_sse_frames_leave_the_callback_url_out():
    ev = status_event("doc", 1, DocumentStatus.COMPLETED, stage="index", project="p",
                      callback_url=TOKEN_URL)
    data = frame(ev)
    assert b"s3cr3t-t0ken" not in data and b"callback_url" not in data
    assert b'"document_id":"doc"' in data and data.startswith(b"id: ")


@pytest.mark.parametrize("args,message", [
    (["--category", "a/.."], "category 'a/..' must match [A-Za-z0-9_-]{1,64}"),
    (["--category", "x" * 65], "must match [A-Za-z0-9_-]{1,64}"),
    (["--document-id", "../etc"], "document id '../etc' must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}"),
    (["--document-id", ".hidden"], "must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}"),
])
def test_cli_ingest_refuses_bad_category_and_document_id(tmp_path, args, message):
    """Exit 2 with the rule, at once (every service address points at a closed port,
    so a command that went on would fail differently, after its broker wait)."""
    f = tmp_path / "a.txt"
    f.write_text("hello")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAGSTREAM_KAFKA_BOOTSTRAP": "127.0.0.1:9",
           "RAGSTREAM_PG_DSN": "postgresql://ragstream@127.0.0.1:9/x", "RAGSTREAM_S3_ENDPOINT": "http://127.0.0.1:9",
           "RAGSTREAM_BROKER_WAIT_S": "3", "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "cli.main", "ingest", str(f), "--no-wait", *args],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in " ".join(out.stdout.split()), out.stdout + out.stderr


def test_apikey_verify_compares_the_hash_before_stamping_last_used(schema_dsn):
    async def scenario():
        await upgrade_head(schema_dsn)
        pool = await asyncpg.create_pool(schema_dsn, min_size=1, max_size=2)
        try:
            keys = ApiKeys(pool)
            created = await keys.create("p")
            key_id = created.key_id
            wrong = f"rsk_{key_id}." + "A" * 43  # the right id, a guessed secret
            assert await keys.verify(wrong) is None
            after_wrong = await pool.fetchval("SELECT last_used_at FROM api_keys WHERE key_id = $1", key_id)
            assert await keys.verify(created.key) == "p"
            after_right = await pool.fetchval("SELECT last_used_at FROM api_keys WHERE key_id = $1", key_id)
            await keys.revoke(key_id)
            assert await keys.verify(created.key) is None
            return after_wrong, after_right
        finally:
            await pool.close()

    after_wrong, after_right = run(scenario())
    assert after_wrong is None, "a wrong secret stamped last_used_at"
    assert after_right is not None


def test_readyz_uses_the_apps_clients_and_one_round_per_window(stack, monkeypatch):
    """60 probes (20 at once, then 40 one after another): no new Kafka admin client
    and no new Milvus client; the checks run once per 2 s window at most."""
    import aiokafka.admin
    import pymilvus

    from api.app import create_app
    from api.state import ApiState

    made = {"kafka_admin": 0, "milvus": 0}

    class CountingAdmin(aiokafka.admin.AIOKafkaAdminClient):
        def __init__(self, *a, **kw):
            made["kafka_admin"] += 1
            super().__init__(*a, **kw)

    class CountingMilvus(pymilvus.MilvusClient):
        def __init__(self, *a, **kw):
            made["milvus"] += 1
            super().__init__(*a, **kw)

    async def scenario():
        app = create_app(stack)
        state = ApiState(stack)
        await state.open()
        app.state.api = state
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
                first = await c.get("/readyz")  # the API's own Milvus connection opens here, once
                assert first.status_code == 200, first.text
                monkeypatch.setattr(aiokafka.admin, "AIOKafkaAdminClient", CountingAdmin)
                monkeypatch.setattr(pymilvus, "MilvusClient", CountingMilvus)
                start = asyncio.get_running_loop().time()
                burst = await asyncio.gather(*(c.get("/readyz") for _ in range(20)))
                after = [await c.get("/readyz") for _ in range(40)]
                elapsed = asyncio.get_running_loop().time() - start
            return [r.status_code for r in burst + after], elapsed, app.state.readiness.rounds
        finally:
            await state.close()

    codes, elapsed, rounds = run(scenario())
    print(f"60 /readyz in {elapsed * 1000:.0f} ms; {rounds} rounds of checks; new clients: {made}")
    assert codes == [200] * 60
    assert made == {"kafka_admin": 0, "milvus": 0}
    assert rounds <= 2 + elapsed / 2.0


def test_readyz_still_sees_a_broker_and_milvus_go_away(stack):
    """The reused clients are no false comfort: with the broker and Milvus stopped,
    the next round reports both down (within the 5 s check limit), and both up again
    once they are back."""
    import devstack

    from api.readiness import readiness
    from api.state import ApiState

    async def checks(state: ApiState) -> dict:
        return {name: c["ok"] for name, c in (await readiness(state)).items()}

    async def scenario():
        state = ApiState(stack)
        await state.open()
        try:
            before = await checks(state)
            await asyncio.to_thread(devstack.down, stack, names=["broker", "milvus"])
            try:
                start = asyncio.get_running_loop().time()
                down = await checks(state)
                took = asyncio.get_running_loop().time() - start
            finally:
                await asyncio.to_thread(devstack.up, stack, names=["broker", "milvus"], timeout_s=120)
            for _ in range(30):  # the producer and Milvus clients reconnect by themselves
                again = await checks(state)
                if all(again.values()):
                    break
                await asyncio.sleep(1.0)
            return before, down, took, again
        finally:
            await state.close()

    before, down, took, again = run(scenario())
    print(f"broker and Milvus down: {down} in {took:.1f} s; back: {again}")
    assert all(before.values())
    assert down == {**before, "broker": False, "milvus": False} and took < 6.5
    assert all(again.values())
