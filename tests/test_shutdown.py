"""The shutdown watchdog (streams/shutdown.py) bounds how long a process takes to
stop after SIGTERM/SIGINT, even when the graceful handler (registered later with
asyncio's add_signal_handler, as Faust does) never finishes; a graceful stop is
not disturbed."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import asyncio, signal, sys
from streams.shutdown import install_shutdown_watchdog
loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
install_shutdown_watchdog(float(sys.argv[1]))
stop = asyncio.Event()
def on_signal():  # like Faust: graceful stop scheduled in the loop
    print("graceful handler ran", flush=True)
    if sys.argv[2] == "graceful":
        stop.set()
for sig in (signal.SIGTERM, signal.SIGINT):
    loop.add_signal_handler(sig, on_signal)
async def main():
    print("ready", flush=True)
    await stop.wait()
loop.run_until_complete(main())
print("stopped cleanly", flush=True)
"""


def _start(grace_s: float, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(grace_s), mode], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_hung_shutdown_is_cut_at_grace(sig):
    from streams.shutdown import WATCHDOG_EXIT_CODE

    proc = _start(1.5, "hang")
    start = time.monotonic()
    proc.send_signal(sig)
    rc = proc.wait(20)
    elapsed = time.monotonic() - start
    out = proc.stdout.read()
    assert rc == WATCHDOG_EXIT_CODE, out
    assert "graceful handler ran" in out  # the existing handler still ran
    assert 1.4 <= elapsed < 5.0, elapsed


def test_graceful_shutdown_untouched():
    proc = _start(10.0, "graceful")
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(20)
    out = proc.stdout.read()
    assert rc == 0, out
    assert "stopped cleanly" in out
    assert time.monotonic() - start < 5.0


def test_the_supervisor_reports_a_stage_its_watchdog_ended():
    """``ragstream worker`` with several stages exits with a child's unclean code: 75 for
    a watchdog exit (a parse abandoned), 128 + n for a signal death; 0 only when every
    child stopped cleanly."""
    from streams.shutdown import WATCHDOG_EXIT_CODE
    from streams.worker import stop_exit_code

    assert stop_exit_code([("normalize", 0), ("partition", 0)]) == 0
    assert stop_exit_code([("normalize", 0), ("partition", WATCHDOG_EXIT_CODE)]) == WATCHDOG_EXIT_CODE
    assert stop_exit_code([("chunk", -9), ("partition", WATCHDOG_EXIT_CODE)]) == 137
