"""One VectorStore survives Milvus restarts: calls made while Milvus is down wait
(reconnecting with backoff) and succeed once it is back; collections are loaded
again after the restart; a server killed with SIGKILL under a connected client
(the dead-channel case) is handled the same way.
"""
from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest

pytestmark = [pytest.mark.integration]


def _rows(project: str, document_id: str, n: int, start: int = 0) -> list[dict]:
    rows = []
    for i in range(start, start + n):
        rng = random.Random(f"{document_id}:{i}")
        vec = [rng.uniform(-1, 1) for _ in range(384)]
        norm = sum(x * x for x in vec) ** 0.5
        rows.append({"chunk_id": f"{document_id}:1:{i}", "vector": [x / norm for x in vec],
                     "document_id": document_id, "version": 1, "chunk_index": i, "page_number": 1,
                     "element_types": "NarrativeText", "filename": "f.txt", "project": project,
                     "category": "default", "text": f"chunk {i}"})
    return rows


def _call_in_thread(fn):
    """Start ``fn()`` in a thread; returns (thread, box) where box holds the result or error."""
    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def _milvus_pid(settings) -> int:
    from devstack import Paths

    return int(Paths.of(settings, "milvus").pid.read_text().strip())


def test_same_store_survives_milvus_restart(stack, project):
    from adapters.vector_store import VectorStore
    import devstack

    store = VectorStore(stack.milvus_uri, reconnect_s=90)
    store.upsert_sync(project, _rows(project, "d1", 3))
    assert store.count_sync(project, "d1") == 3

    devstack.down(stack, names=["milvus"])
    # a call made while Milvus is down waits for it instead of raising
    thread, box = _call_in_thread(lambda: store.count_sync(project, "d1"))
    deadline = time.monotonic() + 30
    while store.reconnects == 0 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)  # poll: the call has met the dead server and dropped its client
    assert thread.is_alive(), f"count returned while Milvus was down: {box}"
    assert store.reconnects >= 1
    devstack.up(stack, names=["milvus"], timeout_s=120)
    thread.join(120)
    assert not thread.is_alive()
    assert box.get("result") == 3, repr(box.get("error"))

    store.upsert_sync(project, _rows(project, "d1", 2, start=3))
    assert store.count_sync(project, "d1") == 5
    hits = store.search_sync(project, _rows(project, "d1", 1, start=4)[0]["vector"], k=3)
    assert hits and hits[0]["chunk_id"] == "d1:1:4"
    store.close()


def test_same_store_survives_sigkilled_milvus(stack, project):
    """The dead-channel case: the server dies under a connected, idle client (no
    goodbye on the channel) and comes back on the same port."""
    from adapters.vector_store import VectorStore
    import devstack

    store = VectorStore(stack.milvus_uri, reconnect_s=90)
    store.upsert_sync(project, _rows(project, "d2", 4))
    assert store.count_sync(project, "d2") == 4

    pid = _milvus_pid(stack)
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while devstack.alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    devstack.up(stack, names=["milvus"], timeout_s=120)

    assert store.count_sync(project, "d2") == 4
    store.upsert_sync(project, _rows(project, "d2", 1, start=4))
    assert store.count_sync(project, "d2") == 5
    assert len(store.search_sync(project, _rows(project, "d2", 1)[0]["vector"], k=2)) == 2
    store.close()


def test_gives_up_after_reconnect_s(stack, project):
    """With Milvus down for longer than ``reconnect_s``, the call raises a
    connection error after about that long (bounded, not forever)."""
    from adapters.vector_store import VectorStore, is_connection_error
    import devstack

    store = VectorStore(stack.milvus_uri, reconnect_s=4, timeout_s=3)
    store.upsert_sync(project, _rows(project, "d3", 1))
    devstack.down(stack, names=["milvus"])
    try:
        start = time.monotonic()
        with pytest.raises(Exception) as err:
            store.count_sync(project, "d3")
        elapsed = time.monotonic() - start
        assert is_connection_error(err.value), repr(err.value)
        assert elapsed < 4 + 3 + 5 + 5  # reconnect_s + one call deadline + backoff + connect
    finally:
        devstack.up(stack, names=["milvus"], timeout_s=120)
    store.close()
