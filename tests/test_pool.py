"""The blocking-work pool isolates tasks (stages/pool.py; issue 8, items 4 and 11).

Pure pool tests: no embedded stack.  Task functions are in tests/pool_tasks.py.
Each test builds its own pool and closes it.
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from stages.pool import BlockingPool, StageTimeout, WorkerCrashed
from tests import pool_tasks as t

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-worker"])
def pool(request):
    p = BlockingPool(request.param)
    yield p
    p.close()


@pytest.fixture
def pool1():
    p = BlockingPool(1)
    yield p
    p.close()


async def _outcomes(*calls):
    return await asyncio.gather(*calls, return_exceptions=True)


async def test_timeout_kills_only_the_slow_task(pool):
    """(a) A task past its 2 s deadline fails alone; three quick tasks beside it succeed.

    The quick tasks take 1 s each, so on two workers one of them is running when
    the slow one is killed (the old executor-wide kill failed it too).
    """
    results = await _outcomes(
        pool.run(t.sleep_then, 30, "slow", timeout_s=2),
        *(pool.run(t.sleep_then, 1, i, timeout_s=60) for i in range(3)))
    assert isinstance(results[0], StageTimeout), results
    assert "timeout after 2 s" in str(results[0])
    assert results[1:] == [0, 1, 2]


async def test_crash_fails_only_the_crashed_task(pool):
    """(b) A process that dies fails only its own call; the pool keeps working afterwards."""
    results = await _outcomes(
        pool.run(t.sleep_then, 1, "before", timeout_s=60),
        pool.run(t.hard_exit, 1, timeout_s=60),
        *(pool.run(t.double, i, timeout_s=60) for i in range(3)))
    assert results[0] == "before"
    assert isinstance(results[1], WorkerCrashed), results
    assert "exit status 1" in str(results[1])
    assert results[2:] == [0, 2, 4]
    assert await pool.run(t.double, 21, timeout_s=60) == 42


async def test_deadline_counts_from_start_not_from_queueing(pool1):
    """(c) On one worker a 1 s task queued ~3 s behind another meets its 2 s deadline."""
    started = time.monotonic()
    first, second = await _outcomes(pool1.run(t.sleep_then, 3, "first", timeout_s=10),
                                    pool1.run(t.sleep_then, 1, "second", timeout_s=2))
    assert (first, second) == ("first", "second")
    assert time.monotonic() - started >= 4  # they did run one after the other


async def test_cancel_kills_the_running_task(pool1, tmp_path: Path):
    """(d) Cancelling the awaiting coroutine kills the process running its task."""
    pid_file = tmp_path / "pid"
    call = asyncio.ensure_future(pool1.run(t.pid_then_sleep, str(pid_file), 60, timeout_s=120))
    pid = int(await _poll(lambda: pid_file.exists() and pid_file.read_text(), 30))
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await _poll(lambda: not _alive(pid), 15)
    assert await pool1.run(t.double, 4, timeout_s=60) == 8  # and the pool still works


async def test_task_exceptions_propagate_unchanged(pool1):
    """Errors raised by the task keep their type, a TimeoutError of its own included."""
    with pytest.raises(ValueError, match="raised by the task itself"):
        await pool1.run(t.fail, "value", timeout_s=60)
    with pytest.raises(TimeoutError) as info:
        await pool1.run(t.fail, "timeout", timeout_s=60)
    assert not isinstance(info.value, StageTimeout)


async def test_close_is_bounded_with_a_running_task(tmp_path: Path):
    """close() kills a task that outlives the join timeout instead of waiting for it."""
    pool = BlockingPool(1, join_timeout_s=1)
    pid_file = tmp_path / "pid"
    call = asyncio.ensure_future(pool.run(t.pid_then_sleep, str(pid_file), 60, timeout_s=120))
    pid = int(await _poll(lambda: pid_file.exists() and pid_file.read_text(), 30))
    started = time.monotonic()
    await asyncio.to_thread(pool.close)
    assert time.monotonic() - started < 10
    assert not _alive(pid)
    with pytest.raises(WorkerCrashed):
        await call


async def test_real_parse_and_its_document_error_cross_the_pool(pool1, tmp_path: Path):
    """partition_file runs in a pebble worker; a DocumentError keeps its type and reason."""
    import pypdf

    from stages.errors import EncryptedDocument
    from stages.partition import partition_file
    from stages.profiles import DEFAULT_PROFILES
    from stages.samples import generate_samples

    pdf = generate_samples(tmp_path)[0]
    profile = DEFAULT_PROFILES["default"]
    elements = await pool1.run(partition_file, pdf, "pdf", profile, timeout_s=300)
    assert len({e["metadata"]["page_number"] for e in elements}) >= 3
    writer = pypdf.PdfWriter(clone_from=pdf)
    writer.encrypt(user_password="pw", algorithm="AES-128")
    writer.write(locked := tmp_path / "locked.pdf")
    with pytest.raises(EncryptedDocument) as info:
        await pool1.run(partition_file, locked, "pdf", profile, timeout_s=300)
    assert info.value.permanent and info.value.reason.startswith("encrypted PDF")


def test_poll_interval_exceeds_every_stage_deadline():
    """Item 11: a consumer busy with the longest stage task is never evicted from its group."""
    from streams import broker_quirks
    from streams.settings import Settings

    settings = Settings()
    interval = broker_quirks.faust_settings(settings)["broker_max_poll_interval"]
    assert interval == broker_quirks.poll_interval_s(settings)
    for deadline in broker_quirks.stage_deadlines_s(settings).values():
        assert interval > deadline
    assert interval > settings.partition_timeout_s > 1000  # Faust's default would be too short


async def _poll(condition, timeout_s: float):
    """Await until ``condition()`` is truthy (returns it) or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return value


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too: pebble reaps its workers, but be exact
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def test_preloaded_processes_start_with_the_parsers_loaded():
    """A ``preload`` pool forks its processes from a server that loaded the parsers
    once: every process, and one that replaces a crashed process, finds them loaded
    by another process (the server) before its first task, with one thread."""
    p = BlockingPool(2, preload=True)
    try:
        await p.start()
        states = await _outcomes(*(p.run(t.preload_state, 1.0, timeout_s=60) for _ in range(2)))
        crashed = await _outcomes(p.run(t.hard_exit, 1, timeout_s=60))
        assert isinstance(crashed[0], WorkerCrashed), crashed
        states += await _outcomes(*(p.run(t.preload_state, 1.0, timeout_s=60) for _ in range(2)))
        for state in states:
            assert state["warmed"].get("seconds") is not None, state  # no error
            assert state["warmed"]["pid"] != state["pid"], state  # loaded in the server
            assert state["pdf_loaded"] and state["threads"] == 1, state
        assert len({s["pid"] for s in states}) >= 3, states  # the replacement too
    finally:
        p.close()


async def test_a_parse_survives_sigterm_to_the_fork_server():
    """A redeploy sends SIGTERM to the worker's whole process group, the fork server
    included.  It ignores it: a running task finishes with its result (were the
    server dead, multiprocessing would report its children as exited, status 255,
    and the parse would fail as crashed), and the pool goes on forking processes."""
    import signal

    from multiprocessing import forkserver

    p = BlockingPool(1, preload=True)
    try:
        await p.start()
        running = asyncio.ensure_future(p.run(t.sleep_then, 2.0, "parsed", timeout_s=60))
        await asyncio.sleep(0.5)
        server = forkserver._forkserver._forkserver_pid
        assert server, "no fork server"
        os.kill(server, signal.SIGTERM)
        assert await running == "parsed"
        crashed = await _outcomes(p.run(t.hard_exit, 1, timeout_s=60))
        assert isinstance(crashed[0], WorkerCrashed), crashed
        assert await p.run(t.double, 21, timeout_s=60) == 42
        assert forkserver._forkserver._forkserver_pid == server  # still the same server
    finally:
        p.close()


# run in an interpreter of its own: a process has one fork server, already started here
FAILING_PRELOAD = """
import asyncio, json, sys
from pathlib import Path
import stages.pool
from stages.pool import BlockingPool
from stages.partition import partition_file
from stages.profiles import DEFAULT_PROFILES
from tests import pool_tasks as t

stages.pool.PRELOAD_MODULES = ("tests.preload_failing",)

async def main():
    p = BlockingPool(1, preload=True)
    try:
        await p.start()
        state = await p.run(t.preload_state, timeout_s=60)
        txt = Path(sys.argv[1])
        txt.write_text("Title\\n\\nA paragraph parsed after a failed preload.")
        elements = await p.run(partition_file, txt, "txt", DEFAULT_PROFILES["default"], timeout_s=120)
        print(json.dumps({"state": state, "texts": [e["text"] for e in elements]}))
    finally:
        p.close()

asyncio.run(main())
"""


def test_a_failing_preload_leaves_the_pool_working(tmp_path: Path):
    """When the fork server's parser warm-up raises (a missing model, say), the
    server still comes up, records and logs the error, and its processes parse
    documents, loading what they need on first use as a spawned process does."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", FAILING_PRELOAD, str(tmp_path / "doc.txt")],
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "model file missing" in out["state"]["warmed"].get("error", ""), out
    assert "seconds" not in out["state"]["warmed"], out
    assert "preload failed" in run.stderr, run.stderr[-3000:]  # logged, not silent
    assert any("parsed after a failed preload" in text for text in out["texts"]), out


async def test_a_long_task_is_logged_while_awaited(pool1, monkeypatch, caplog):
    """A task awaited past LONG_WAIT_LOG_S is logged as a WARNING (running or not yet
    started), so a stage waiting on its pool for minutes says so."""
    import logging

    import stages.pool as pool_module

    monkeypatch.setattr(pool_module, "LONG_WAIT_LOG_S", 0.5)
    with caplog.at_level(logging.WARNING, logger="stages.pool"):
        assert await pool1.run(t.sleep_then, 1.8, "done", timeout_s=60) == "done"
    assert any("pool task sleep_then not done after" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]


async def test_a_bulk_pool_parses_at_lower_cpu_priority():
    """The partition stage's range slots are a pool of their own whose processes run
    ``bulk_parse_nice`` lower (streams/resources.py, issue 26): a page range or a
    project's burst yields the cores to interactive work; the stage's other pool keeps
    the worker's priority, and a bulk task goes to the niced one."""
    from streams.resources import Resources
    from streams.settings import Settings

    base = os.nice(0)
    resources = Resources(Settings(bulk_parse_nice=7), pool_workers=4, bulk_workers=2)
    try:
        assert (resources.pool.workers, resources.bulk_pool.workers) == (2, 2)
        assert await resources.pool_for(True).run(t.niceness, timeout_s=60) == min(19, base + 7)
        assert await resources.pool_for(False).run(t.niceness, timeout_s=60) == base
    finally:
        for p in resources.pools():
            p.close()
    plain = Resources(Settings(bulk_parse_nice=0), pool_workers=4, bulk_workers=0)
    assert plain.pool_for(True) is plain.pool and plain.pool.workers == 4
    plain.pool.close()
