"""devstack/worker_process.py without a stack: a terminated caller still runs its
``finally`` (where it stops the worker it started in a session of its own)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CALLER = """
import sys, time
sys.path.insert(0, {root!r})
from devstack.worker_process import exit_on_sigterm
exit_on_sigterm()
try:
    print("ready", flush=True)
    time.sleep(60)
finally:
    open({marker!r}, "w").write("stopped")
"""


def test_sigterm_runs_the_callers_finally(tmp_path):
    marker = tmp_path / "finally-ran"
    proc = subprocess.Popen([sys.executable, "-c", CALLER.format(root=str(ROOT), marker=str(marker))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 143
    assert marker.read_text() == "stopped"


def test_a_handler_someone_installed_is_kept():
    from devstack.worker_process import exit_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    mine = lambda signum, frame: None  # noqa: E731
    signal.signal(signal.SIGTERM, mine)
    try:
        exit_on_sigterm()
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)
