"""The broker killed with SIGKILL and started again keeps its records (S3 storage is
the default), ``devstack.up`` restarts it the first time, ingest works again, and a
worker that lived through the outage stops within its shutdown grace on SIGTERM.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from rich.console import Console

from tests.conftest import run
from tests.process_helpers import wait_for_line

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GRACE_S = 10.0  # the survivor worker's RAGSTREAM_SHUTDOWN_GRACE_S


async def _status_history(bootstrap: str, document_id: str) -> list[str]:
    from streams.kafka_io import status_history

    return [ev.status for ev in await status_history(bootstrap) if ev.document_id == document_id]


async def _topics(bootstrap: str) -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


def _ingest(path, project, timeout_s=240):
    from cli.progress import ingest_and_follow

    return run(ingest_and_follow([path], project=project, category="default", timeout_s=timeout_s,
                                 console=Console(quiet=True)))


def test_broker_sigkill_restart_keeps_records(stack, tmp_path, project):
    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from topics.catalogue import ALL

    assert stack.broker_storage.startswith("s3://"), "durable broker storage is the default"
    log = stack.data_dir / "logs" / "survivor-worker.log"
    log.unlink(missing_ok=True)
    survivor = start_worker(log, env={"RAGSTREAM_SHUTDOWN_GRACE_S": str(GRACE_S)})
    try:
        wait_for_line(log, "ready,", survivor, 120)
        first = tmp_path / "before.txt"
        first.write_text("Pump station energy report. " * 40)
        before = _ingest(first, project)
        doc = before.results[0].document_id
        assert before.last[doc].status == "COMPLETED"

        broker_pid = int(devstack.Paths.of(stack, "broker").pid.read_text())
        os.kill(broker_pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while devstack.alive(broker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)

        started = devstack.up(stack, timeout_s=120)  # must work the first time
        assert started["broker"].healthy and started["broker"].detail == "started"

        assert {s.name for s in ALL} <= run(_topics(stack.kafka_bootstrap))
        history = run(_status_history(stack.kafka_bootstrap, doc))
        assert "COMPLETED" in history, history

        second = tmp_path / "after.txt"
        second.write_text("Treatment plant megalitre figures. " * 40)
        after = _ingest(second, project)
        assert not after.timed_out
        assert after.last[after.results[0].document_id].status == "COMPLETED"

        t0 = time.monotonic()
        os.killpg(survivor.pid, signal.SIGTERM)
        rc = survivor.wait(GRACE_S + 20)
        stop_s = time.monotonic() - t0
        print(f"survivor worker stopped {stop_s:.1f} s after SIGTERM, exit code {rc}")
        assert stop_s < GRACE_S + 5, stop_s
    finally:
        stop_worker(survivor, grace_s=5)


def test_up_right_after_a_kill_starts_a_fresh_broker(stack):
    """``up`` that finds the broker's process still listed but dying (killed, exit not
    complete yet) starts a fresh broker instead of failing with "exited during
    startup".  Made deterministic: the broker is frozen (SIGSTOP: listed, does not
    answer), ``up`` begins, then the broker is killed."""
    import threading

    import devstack

    paths = devstack.Paths.of(stack, "broker")
    old_pid = int(paths.pid.read_text())
    os.kill(old_pid, signal.SIGSTOP)
    killer = threading.Timer(5.0, os.kill, (old_pid, signal.SIGKILL))
    killer.start()
    try:
        result = devstack.up(stack, names=["broker"], timeout_s=60)
    finally:
        killer.join()
    assert result["broker"].healthy and result["broker"].detail == "started"
    assert result["broker"].pid != old_pid
