"""A worker whose output is redirected to a file writes plain text: no terminal
control codes from faust's start-up spinner (seen by a newcomer at the default
loglevel, where the spinner runs)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_redirected_worker_log_has_no_control_codes(stack, tmp_path):
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(  # the default loglevel (warning): faust's spinner is on there
            [str(Path(sys.executable).with_name("ragstream")), "worker", "--stages", "projection"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while b"projection ready" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    text = log.read_bytes()
    assert b"\x1b" not in text and b"\x08" not in text, text[:2000]
