"""Any start order works: the API started before its broker exists waits for it
(with backoff), creates the catalogue's topics itself, becomes ready, streams
status events, and an upload is processed by a worker started after it.

Runs against a fresh broker of its own (memory storage, a free port, its own
data_dir) so that no topic exists yet; S3, PostgreSQL, Milvus and Triton are the
test stack's.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

from api_helpers import ROOT, SseReader, create_key, free_port, upload, wait_status
from conftest import run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_api_first_on_a_fresh_broker(stack, tmp_path, project):
    import devstack
    from devstack.worker_process import start_worker, stop_worker
    from topics.catalogue import ALL

    bootstrap = f"127.0.0.1:{free_port()}"
    fresh = stack.model_copy(update={"data_dir": tmp_path / "fresh", "kafka_bootstrap": bootstrap,
                                     "broker_storage": "memory://tansu/"})
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAGSTREAM_KAFKA_BOOTSTRAP": bootstrap,
           "RAGSTREAM_BROKER_WAIT_S": "90"}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "api.log"
    api = subprocess.Popen([sys.executable, "-m", "cli.main", "api", "--host", "127.0.0.1",
                            "--port", str(port), "--log-level", "warning"],
                           cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    worker = None
    try:
        # the API is up and waiting for a broker that does not exist yet
        broker_up = threading.Timer(4.0, lambda: devstack.up(fresh, names=["broker"], timeout_s=60))
        broker_up.start()
        deadline = time.monotonic() + 120
        ready = False
        while time.monotonic() < deadline and not ready:
            assert api.poll() is None, f"API exited at start; see {log}:\n{log.read_text()[-3000:]}"
            try:
                ready = httpx.get(url + "/readyz", timeout=5).status_code == 200
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        broker_up.join()
        assert ready, f"API not ready; see {log}:\n{log.read_text()[-3000:]}"

        from tests.test_broker_restart import _topics

        assert {s.name for s in ALL} <= run(_topics(bootstrap))  # the API created them

        key = create_key(project)
        sse = SseReader(url, key)
        try:
            worker = start_worker(tmp_path / "worker.log", env={"RAGSTREAM_KAFKA_BOOTSTRAP": bootstrap})
            doc_path = tmp_path / "start-order.txt"
            doc_path.write_text("Start order does not matter. " * 40)
            r = upload(url, key, doc_path, project=project, category="default")
            assert r.status_code == 202, r.text
            doc = r.json()["document_id"]
            final = wait_status(url, key, doc, {"COMPLETED", "FAILED"}, timeout_s=240)
            assert final["status"] == "COMPLETED", final
            events = sse.wait_for(doc, {"COMPLETED"}, timeout_s=60)
            assert events[0]["status"] == "QUEUED" and events[-1]["status"] == "COMPLETED"
        finally:
            sse.close()
    finally:
        if worker is not None:
            stop_worker(worker, grace_s=15)
        api.terminate()
        try:
            api.wait(15)
        except subprocess.TimeoutExpired:
            api.kill()
        devstack.down(fresh, names=["broker"])
