"""bench/cpu.py: a process that burns a known amount of CPU is counted with it, an
idle one is not — independent of how loaded the machine is (CPU seconds, not shares
of wall time, are compared)."""
from __future__ import annotations

import subprocess
import sys

from bench.cpu import CpuMeter

BURN = "import time\nwhile time.process_time() < 1.0: pass\nprint('done', flush=True)\ntime.sleep(30)"
NAP = "import time\nprint('done', flush=True)\ntime.sleep(30)"


def test_cpu_meter_counts_the_cpu_seconds_a_process_burns():
    procs: dict[str, subprocess.Popen] = {}
    meter = CpuMeter({name: (lambda n=name: [procs[n].pid] if n in procs else []) for name in ("burn", "nap")})
    meter.start()
    try:
        for name, code in (("burn", BURN), ("nap", NAP)):
            procs[name] = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            meter.poll()  # seen while young: counted from 0
        for p in procs.values():
            assert p.stdout.readline().strip() == "done"
        share = meter.stop()
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
    burned = share.by_component["burn"] * share.seconds
    idle = share.by_component["nap"] * share.seconds
    assert 0.95 <= burned <= 1.6, share.line()  # 1.0 s of loop + interpreter start-up
    assert idle < 0.5, share.line()
    assert share.line().startswith("machine ")
