"""A worker told to stop (SIGTERM: a redeploy, a KEDA scale-down) while it parses a
document finishes that parse, stores its records and commits before it leaves, within
its shutdown grace: it exits 0, and the partition stage's consumer group has no record
left to read (a successor would not parse the document again); the document completes.

Marked ``drill`` (runs last): the session worker is stopped, so the two workers
started here are the only members of their consumer groups.  The default 5-page scan
parses in about 12 s on 2 cores; ``DRAIN_TEST_PAGES=30 DRAIN_TEST_GRACE_S=180`` shows a
drain longer than a minute (README, "Partitions, pod memory and long parses").
"""
from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest
from rich.console import Console

from tests.conftest import run
from tests.process_helpers import wait_for_line

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.drill, pytest.mark.timeout(600)]

GRACE_S = float(os.environ.get("DRAIN_TEST_GRACE_S", "90"))  # the draining worker's RAGSTREAM_SHUTDOWN_GRACE_S
PAGES = int(os.environ.get("DRAIN_TEST_PAGES", "5"))  # scanned pages: OCR keeps partition busy for seconds


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout_s} s")


def _statuses(bootstrap: str, document_id: str) -> list[str]:
    from streams.kafka_io import status_history

    return [ev.status for ev in run(status_history(bootstrap)) if ev.document_id == document_id]


def _partition_lag(bootstrap: str) -> list:
    from streams.lag import read_lag, stage_targets

    return run(read_lag(bootstrap, stage_targets(["partition"])))


def test_a_stopped_worker_finishes_the_parse_it_started(stack, worker, tmp_path, project):
    from bench.fairness_docs import dense_pdf, scanned_pdf
    from cli.progress import ingest_and_follow
    from devstack.worker_process import start_worker, stop_worker
    from streams.app import STAGES

    stop_worker(worker)
    logs = stack.data_dir / "logs"
    first_log, rest_log = logs / "drain-first.log", logs / "drain-rest.log"
    for log in (first_log, rest_log):
        log.unlink(missing_ok=True)
    scan = scanned_pdf(dense_pdf(tmp_path / "src.pdf", PAGES, f"drain{os.getpid()}"),
                       tmp_path / "scan.pdf", PAGES)
    # the draining worker runs the stages up to the parse; another one the rest, so the
    # document completes after the first has gone (both start at once)
    first = start_worker(first_log, stages="normalize,partition",
                         env={"RAGSTREAM_SHUTDOWN_GRACE_S": str(GRACE_S)})
    rest = start_worker(rest_log, stages=",".join(s for s in STAGES if s not in ("normalize", "partition")))
    outcome: dict = {}

    def follow() -> None:
        outcome["result"] = run(ingest_and_follow([scan], project=project, category="default",
                                                  timeout_s=400, console=Console(quiet=True)))

    follower = threading.Thread(target=follow, daemon=True)
    try:
        wait_for_line(first_log, "partition ready,", first, 180)
        follower.start()
        found: dict = {}

        def partitioning() -> bool:
            m = re.search(r"normalize: done for (\S+) v1", first_log.read_text(errors="replace"))
            if m:
                found["doc"] = m.group(1)
                return "PARTITIONING" in _statuses(stack.kafka_bootstrap, m.group(1))
            return False

        _wait_for(partitioning, 180, "PARTITIONING")
        doc = found["doc"]
        time.sleep(2.0)  # well inside the parse
        assert f"partition: done for {doc}" not in first_log.read_text(errors="replace"), \
            "the parse ended before the stop: make the document longer"
        stopped_at = time.monotonic()
        os.killpg(first.pid, signal.SIGTERM)
        rc = first.wait(GRACE_S + 30)
        stop_s = time.monotonic() - stopped_at
        text = first_log.read_text(errors="replace")
        print(f"first worker stopped {stop_s:.1f} s after SIGTERM, exit code {rc}")
        print("\n".join(line for line in text.splitlines() if f"partition: done for {doc}" in line))
        assert rc == 0, f"exit code {rc}: killed by its watchdog or a crash; see {first_log}"
        assert f"partition: done for {doc}" in text, "the parse under way at SIGTERM was abandoned"
        # and committed before it left: no partition-stage record is left for a successor
        lag = _partition_lag(stack.kafka_bootstrap)
        assert lag and all(r.group_exists and r.lag == 0 for r in lag), [r.as_dict() for r in lag if r.lag]

        follower.join(420)
        result = outcome["result"]
        assert result.last[doc].status == "COMPLETED", result.last[doc]
    finally:
        stop_worker(first, grace_s=5)
        stop_worker(rest, grace_s=20)

