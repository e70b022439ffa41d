"""``ragstream drill``: the checks on hand-made inputs (fast, no stack), and the
drills themselves against the test stack (slow).

The slow tests start their own workers (Procfile layout / all-in-one) through the
CLI entry point; they use the ``stack`` fixture only, not the session ``worker``.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drills.drill import DRILLS, SPECS, select
from drills.checks import (Callback, Ev, chunk_diff, duplicate_completions, evaluate,
                                  expected_chunk_ids, reprocessed, summary_line)

SUMMARY = re.compile(r"^drills_passed=(\d+)/(\d+) lost=(\d+) extra=(\d+) "
                     r"duplicate_completions=(\d+) reprocessed=(\d+) leaked=(\d+)$")


def _done(doc: str, version: int, total: int, t0: float = 100.0) -> list[Ev]:
    """The events of one version that went through cleanly, from ``t0``."""
    statuses = ["QUEUED", "NORMALIZING", "PARTITIONING", "CHUNKING", "ENHANCING", "EMBEDDING",
                "INDEXING", "COMPLETED"]
    return [Ev(doc, version, s, t0 + i, total if s in ("INDEXING", "COMPLETED") else 0)
            for i, s in enumerate(statuses)]


def _cb(doc: str, version: int, status: str = "COMPLETED", project: str = "p") -> Callback:
    return Callback(f"{doc}:v{version}:{status}",
                    {"document_id": doc, "version": version, "status": status, "project": project})


def test_clean_run_passes():
    events = _done("a", 1, 3) + _done("b", 1, 2)
    present = {"a": expected_chunk_ids("a", 1, 3), "b": expected_chunk_ids("b", 1, 2)}
    r = evaluate("x", expected={"a": 1, "b": 1}, events=events + events[:4],  # re-read: no dup
                 present=present, callbacks=[_cb("a", 1), _cb("b", 1), _cb("a", 1)])
    assert r.passed, r
    assert (r.lost, r.extra, r.duplicate_completions, r.reprocessed) == (0, 0, 0, 0)


def test_lost_and_extra_chunks_are_counted_per_id():
    events = _done("a", 2, 3)
    present = {"a": {"a:2:0", "a:2:2", "a:1:0", "a:1:1"}, "stranger": {"stranger:1:0"}}
    r = evaluate("x", expected={"a": 2}, events=events, present=present, callbacks=[_cb("a", 2)])
    assert r.lost == 1 and r.details["lost"] == ["a:2:1"]
    assert r.extra == 3  # both superseded v1 chunks and the chunk of a document never ingested
    assert not r.passed
    assert chunk_diff({"x:1:0", "x:1:1"}, {"x:1:1", "x:1:5"}) == ({"x:1:0"}, {"x:1:5"})


def test_duplicate_completions_count_extra_emissions_and_completed_plus_failed():
    events = _done("a", 1, 2) + [Ev("a", 1, "COMPLETED", 200.0, 2), Ev("a", 1, "COMPLETED", 201.0, 2)]
    events += _done("b", 1, 1) + [Ev("b", 1, "FAILED", 300.0, error="index: boom")]
    assert duplicate_completions(events) == {("a", 1): 2, ("b", 1): 1}
    # the same record read twice is not a second emission
    assert duplicate_completions(_done("c", 1, 1) * 2) == {}
    r = evaluate("x", expected={"a": 1, "b": 1}, events=events,
                 present={"a": expected_chunk_ids("a", 1, 2), "b": expected_chunk_ids("b", 1, 1)},
                 callbacks=[_cb("a", 1), _cb("b", 1), _cb("b", 1, "FAILED")])
    assert r.duplicate_completions == 3 and not r.callbacks_ok and not r.passed


def test_reprocessed_after_completion_and_after_redeploy():
    events = _done("a", 1, 1, t0=100) + [Ev("a", 1, "NORMALIZING", 150.0)]
    events += _done("b", 1, 1, t0=100) + [Ev("b", 1, "INDEXING", 150.0, 1)]
    events += _done("c", 1, 1, t0=200)  # completed after the redeploy at 160
    assert reprocessed(events) == {"a"}  # restart statuses only by default
    assert reprocessed(events, completed_before=160.0, after=160.0,
                       statuses=("NORMALIZING", "INDEXING")) == set()  # events before 160
    events.append(Ev("b", 1, "CHUNKING", 170.0))
    assert reprocessed(events, completed_before=160.0, after=160.0,
                       statuses=("NORMALIZING", "CHUNKING")) == {"b"}
    r = evaluate("redeploy", expected={"a": 1, "b": 1, "c": 1}, events=events,
                 present={d: expected_chunk_ids(d, 1, 1) for d in "abc"},
                 callbacks=[_cb(d, 1) for d in "abc"], reprocess_after=160.0,
                 reprocess_statuses=("NORMALIZING", "CHUNKING"))
    assert r.reprocessed == 1 and not r.passed
    assert r.details["reprocessed"] == {"b": "v1 CHUNKING by ?, 63.0s after COMPLETED"}
    # a new version's stage events are not reprocessing of the old one
    assert reprocessed(_done("d", 1, 1) + _done("d", 2, 1, t0=300)) == set()


def test_not_terminal_failed_and_missing_callback_fail_the_drill():
    events = _done("a", 1, 1) + _done("b", 1, 1)[:4] + [Ev("c", 1, "FAILED", 150.0, error="x")]
    r = evaluate("x", expected={"a": 1, "b": 1, "c": 1}, events=events,
                 present={"a": {"a:1:0"}}, callbacks=[_cb("c", 1, "FAILED")])
    assert r.not_terminal == 1 and r.failed == 1
    assert not r.callbacks_ok  # a's COMPLETED callback never came
    assert not r.passed


def test_summary_line_format():
    a = evaluate("a", expected={"a": 1}, events=_done("a", 1, 1), present={"a": {"a:1:0"}},
                 callbacks=[_cb("a", 1)])
    b = evaluate("b", expected={"b": 1}, events=_done("b", 1, 2), present={"b": {"b:1:0"}},
                 callbacks=[_cb("b", 1)])
    line = summary_line([a, b])
    assert line == "drills_passed=1/2 lost=1 extra=0 duplicate_completions=0 reprocessed=0 leaked=0"
    assert SUMMARY.match(line)


def test_every_drill_is_declared_once_and_selected_in_order():
    """Each drill named in DRILLS has its declaration in SPECS (fault, workers, run
    options: the runner asks the declaration, never a drill's name); ``--only`` keeps
    the default order and refuses unknown names."""
    assert set(SPECS) == set(DRILLS) and len(DRILLS) == len(set(DRILLS))
    assert SPECS["hosts"].held_back_half and SPECS["hosts"].lag_must_drain
    assert [n for n, d in SPECS.items() if d.fresh_workers_after] == ["restart-broker"]
    assert select("restart-broker,redeploy") == ["redeploy", "restart-broker"]
    with pytest.raises(ValueError, match="unknown drill"):
        select("hosts,nope")


def test_corpus_is_deterministic_mixed_and_has_a_split_pdf(tmp_path):
    from pypdf import PdfReader

    from stages.profiles import Profile
    from drills.drill import make_corpus

    one = make_corpus(tmp_path / "a", 8, seed=3)
    two = make_corpus(tmp_path / "b", 8, seed=3)
    assert [p.read_bytes() for p in one] == [p.read_bytes() for p in two]
    assert {p.suffix for p in one} >= {".pdf", ".docx", ".txt", ".md", ".html"}
    split = [p for p in one if "split" in p.name]
    assert len(PdfReader(split[0]).pages) > Profile().max_pages_per_task
    v2 = make_corpus(tmp_path / "a", 8, seed=3, revision=2, only=[3])
    assert v2[0].name == one[3].name and v2[0].read_bytes() != two[3].read_bytes()
    texts = [p.read_bytes() for p in make_corpus(tmp_path / "c", 8, seed=4)]
    assert len(set(texts)) == len(texts)


DRILL_LINE = re.compile(r"^(?P<name>\S+)\s+passed=(?P<passed>true|false) ")


@pytest.fixture
def drill_stack(stack, worker):
    """The test stack with the session worker stopped: the drill's own workers must be
    the only members of the stage groups (and the only notify, with the drill's
    allow-list), or its kills and redeploy would be moot.  The drills run last."""
    from devstack.worker_process import stop_worker

    stop_worker(worker)
    return stack


@pytest.mark.slow
@pytest.mark.drill
@pytest.mark.timeout(1800)
def test_every_drill_passes_in_one_run(drill_stack):
    """Every drill, in one ``ragstream drill --docs 6`` through the CLI entry point, as a
    user runs it: one Procfile fleet serves the drills one after another (started once,
    and afresh only after a drill that restarts the broker, stalls or crashes; the
    redeploy drill uses its own all-in-one worker).  Each drill must pass -- no chunk
    lost or extra, one COMPLETED and one callback per version, nothing reprocessed,
    nothing leaked -- and the last line has the summary format.  (One run instead of
    one per drill: the fleet's start, about 25 s on 2 cores, is paid once.)"""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ragstream")), "drill", "--docs", "6",
         "--stall", "120", "--timeout", "420"],
        capture_output=True, text=True, env=env, timeout=1700)
    took = time.monotonic() - started
    lines = proc.stdout.strip().splitlines()
    print(proc.stdout[-12000:], proc.stderr[-3000:], f"took {took:.0f}s", sep="\n")
    assert lines, proc.stderr[-3000:]
    m = SUMMARY.match(lines[-1])
    assert m, lines[-1]
    drill_lines = [ln for ln in lines if DRILL_LINE.match(ln)]
    assert [DRILL_LINE.match(ln)["name"] for ln in drill_lines] == list(DRILLS)
    failed = [ln for ln in drill_lines if DRILL_LINE.match(ln)["passed"] != "true"]
    assert not failed, "\n".join(failed)
    hosts = next(ln for ln in drill_lines if ln.startswith("hosts "))
    assert len(re.findall(r"takeover [\d.]+s", hosts)) == 2, hosts  # after the cut and the kill
    assert not [ln for ln in lines if ln.startswith("cleanup:")]
    assert lines[-1] == (f"drills_passed={len(DRILLS)}/{len(DRILLS)} lost=0 extra=0 "
                         "duplicate_completions=0 reprocessed=0 leaked=0"), "\n".join(lines[-14:])
    assert proc.returncode == 0
