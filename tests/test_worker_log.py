"""A worker whose output is redirected to a file writes plain text: no terminal
control codes from faust's start-up spinner (seen by a newcomer at the default
loglevel, where the spinner runs), and its ready line names the stage's own topic
partitions, not Faust's leader topic."""
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
    ready = next(line for line in text.decode().splitlines() if "projection ready" in line)
    assert "assigned ragstream.status [" in ready and "__leader" not in ready, ready


def test_ready_line_leaves_out_the_leader_topic():
    from faust.types import TP

    from streams.worker import describe_assignment

    assigned = {TP("ragstream.chunks", 2), TP("ragstream.chunks", 0),
                TP("ragstream-embed-__assignor-__leader", 0)}
    assert describe_assignment(assigned, "ragstream-embed") == "ragstream.chunks [0, 2]"
    assert describe_assignment({TP("ragstream-embed-__assignor-__leader", 0)},
                               "ragstream-embed").startswith("no partitions")
