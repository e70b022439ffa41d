"""Every stage's Faust app builds, with no broker running.

A stage app that cannot be built stops the whole pipeline, and every pipeline test
then fails on a timeout (a misnamed function in create_app once did exactly that: CI
ran out of time).  This test catches it in a second.
"""
from __future__ import annotations

from streams import broker_quirks
from streams.app import STAGES, create_app
from streams.settings import Settings


def test_every_stage_app_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSTREAM_BROKER_QUIRKS", "true")
    settings = Settings(data_dir=tmp_path)
    for stage in STAGES:
        app = create_app(stage, settings)
        assert app.conf.id == f"ragstream-{stage}"
        assert app.agents, f"{stage}: no agent declared"


def test_stage_apps_retry_offset_commits(tmp_path, monkeypatch):
    """Quirk 8's workaround is installed on the app's transport (its consumer class)."""
    monkeypatch.setenv("RAGSTREAM_BROKER_QUIRKS", "true")
    assert broker_quirks.quirks_enabled()
    app = create_app("notify", Settings(data_dir=tmp_path))
    assert app.transport.Consumer.__name__ == "CommitRetryingConsumer"


def test_stage_consumers_take_the_fetch_wait_and_producers_the_linger(tmp_path, monkeypatch):
    """Quirk 13: the stage consumer's Fetch wait is ``consumer_fetch_wait_ms`` (faust
    hard-codes 1,500), and stage producers linger ``producer_linger_ms`` so that one
    document's records travel in one produce request."""
    import asyncio

    monkeypatch.setenv("RAGSTREAM_BROKER_QUIRKS", "true")
    app = create_app("chunk", Settings(data_dir=tmp_path, consumer_fetch_wait_ms=321,
                                       producer_linger_ms=7))
    assert app.conf.producer_linger == 0.007

    async def wait_ms() -> int:
        consumer = app.consumer._thread._create_consumer(loop=asyncio.get_running_loop())
        try:
            return consumer._fetch_max_wait_ms
        finally:
            await consumer.stop()

    assert asyncio.run(wait_ms()) == 321
