"""A notify worker that stops gives up its callback leases (agents/notify.Notifier.close),
so the next notify worker resumes them at once.  Found running compose's notify
service (tests/test_compose_exercised.py): its log said "could not release callback
leases on stop" — the notifier's close and the stage's resources' close were two
receivers of the same shutdown signal, which Faust runs in no fixed order, and when
the resources went first the release met a closed PostgreSQL pool.
"""
from __future__ import annotations

import uuid

import asyncpg
import faust
import pytest

from conftest import run

pytestmark = pytest.mark.integration


async def _stop_with_a_leased_callback(settings) -> dict:
    from agents import register
    from streams.app import app_id

    app = faust.App(app_id("notify") + "-shutdown-test", broker=f"kafka://{settings.kafka_bootstrap}",
                    web_enabled=False, autodiscover=False)
    ctx = register(app, "notify", settings)
    callbacks = await ctx.notifier.callbacks()
    doc = "doc-" + uuid.uuid4().hex[:12]
    assert await callbacks.enqueue(document_id=doc, version=1, status="COMPLETED", project="p",
                                   url="http://localhost:9/hook", body=b"{}")
    key = f"{doc}:v1:COMPLETED"
    assert (await callbacks.claim(key, lease_s=600))["lease_owner"] == callbacks.owner
    await app.on_before_shutdown.send()  # what the worker's stop sends
    conn = await asyncpg.connect(settings.pg_dsn)
    try:
        return dict(await conn.fetchrow("SELECT state, lease_owner, lease_until FROM callbacks"
                                        " WHERE idempotency_key = $1", key))
    finally:
        await conn.close()


def test_stopping_the_notify_stage_releases_its_callback_leases(stack):
    for _ in range(4):  # the receivers' order was arbitrary: one run could pass by luck
        row = run(_stop_with_a_leased_callback(stack))
        assert row == {"state": "pending", "lease_owner": None, "lease_until": None}
