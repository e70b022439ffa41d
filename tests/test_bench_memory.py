"""bench/scale.py's memory figure: pages a forked process shares with its parent count
once in :func:`bench.scale.tree_pss_mb` (PSS), where a sum of RSS counts them once
per process — the reason the 300-page scale test measures PSS now that parse
processes fork from one preloaded server."""
from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from bench.scale import tree_pss_mb

# a parent that touches 200 MiB, then forks 3 children that only read it and wait
SHARED = """
import os, sys, time
buf = bytearray(200 * 2**20)
for i in range(0, len(buf), 4096):
    buf[i] = 1
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print("ready", flush=True)
time.sleep(60)
"""


def test_pages_shared_with_forked_children_count_once():
    proc = subprocess.Popen([sys.executable, "-c", SHARED], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        tree = [psutil.Process(proc.pid)] + psutil.Process(proc.pid).children(recursive=True)
        assert len(tree) == 4
        rss_sum = sum(p.memory_info().rss for p in tree) / 2**20
        pss = tree_pss_mb(proc.pid)
        assert rss_sum > 4 * 200, rss_sum  # every process counts the 200 MiB
        assert 200 <= pss < 200 + 3 * 60, (pss, rss_sum)  # counted once (+ interpreters)
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()


def test_a_gone_root_raises():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(psutil.NoSuchProcess):
        tree_pss_mb(proc.pid)
