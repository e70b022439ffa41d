"""Shared by tests that start a ``ragstream worker`` of their own: wait for a line in
its log while checking that the process is still running."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path


def wait_for_line(log: Path, text: str, proc: subprocess.Popen, timeout_s: float) -> None:
    """Return once ``text`` is in ``log`` (a log not written yet counts as empty),
    polling every 0.2 s for up to ``timeout_s`` seconds.  Raises AssertionError if ``proc``
    exits first or the line never comes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"worker exited ({proc.returncode}); see {log}"
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {log} within {timeout_s} s")
