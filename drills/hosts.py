"""The ``hosts`` drill: the services on one host, the stage workers on two more
(network namespaces: :mod:`drills.hosts_net`), one host cut off the network and
another killed mid-ingest.

1. Hosts ``a`` and ``b`` each run the all-in-one ``ragstream worker`` (every stage's
   consumer group has one member on each host); the Procfile fleet of the other
   drills is stopped first, so these are the only members.
2. Half the corpus is ingested; at about 30 % of its status events host ``a`` is cut
   off (its link down: packets dropped, no reset) for ``CUT_S`` — longer than the
   consumer session timeout (streams/broker_quirks.SESSION_TIMEOUT_S) — so the broker
   expels its members and ``b`` must take over every partition.  Then ``a`` comes
   back and rejoins its groups.
3. The other half is ingested; at about 60 % of all status events every process of
   host ``b`` is SIGKILLed (as a host that dies, relays included) and ``a`` must take
   over every partition.
4. The drill runner waits until every version is terminal and checks (drills/checks.py)
   that no chunk is lost or extra and no completion duplicated; then every stage
   group's lag must drain to 0 (:func:`lag_drained`).

*Takeover time* of a stage: from the cut (or kill) to the first line in which the
surviving host's worker says it holds every topic partition the stage's group read
before (``ragstream worker: STAGE ready, assigned …``, streams/worker.py), seen by
polling its log every 0.2 s.  The drill fails when a takeover takes longer than
``SESSION_TIMEOUT_S + REJOIN_ALLOWANCE_S``: the broker only notices a silent member
after the session timeout, and the group then re-forms (every member rejoins).
"""
from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Optional, Sequence

from drills import faults
from drills.hosts_net import HostNet
from streams.settings import Settings

CUT_S = 25.0  # how long host a is off the network (> the 10 s session timeout)
REJOIN_ALLOWANCE_S = 20.0  # a group's re-forming after the broker expels a member
HOSTS = ("a", "b")
ASSIGNED = re.compile(r"ragstream worker: (\w+) ready, assigned ([^\"\n]*)")
TOPIC_PARTS = re.compile(r"(\S+) \[([\d, ]*)\]")


def parse_assignment(text: str) -> frozenset[tuple[str, int]]:
    """``"t1 [0, 1]; t2 [3]"`` (streams.worker.describe_assignment) → {(t1, 0), …};
    ``"no partitions …"`` → empty."""
    return frozenset((topic, int(p)) for topic, parts in TOPIC_PARTS.findall(text)
                     for p in parts.split(",") if p.strip())


class AssignmentLog:
    """Tails one worker log: per stage, the latest assignment line and when it was
    read (``time.monotonic()``), and every topic partition it ever held."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0
        self.latest: dict[str, tuple[float, frozenset]] = {}
        self.held: dict[str, set] = {}

    def poll(self) -> None:
        """Read what the log gained since the last poll (whole lines only)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        now = time.monotonic()
        for stage, text in ASSIGNED.findall(data[:end].decode(errors="replace")):
            tps = parse_assignment(text)
            self.latest[stage] = (now, tps)
            self.held.setdefault(stage, set()).update(tps)


class HostFleet:
    """The worker hosts and their all-in-one workers; :meth:`stop` always (the drill
    runner's Stack does, on every exit path)."""

    def __init__(self, settings: Settings, label: str, ports: Sequence[int]):
        self.settings, self.label = settings, label
        log_dir = settings.data_dir / "logs" / "drill"
        self.net = HostNet(HOSTS, ports, log_dir / f"{label}-relays.log")
        self.workers: dict[str, faults.Worker] = {}
        self.logs: dict[str, AssignmentLog] = {}
        self.notes: list[str] = []

    async def start(self, timeout_s: float = 300.0) -> float:
        """Make the hosts and start one all-in-one worker on each; returns the
        seconds until both were ready.  Raises HostNetError / WorkerStartError."""
        t0 = time.monotonic()
        await asyncio.to_thread(self.net.open)
        for name, host in self.net.hosts.items():
            worker = faults.spawn(self.settings, "all", f"{self.label}-{name}", host.exec_prefix())
            self.workers[name], self.logs[name] = worker, AssignmentLog(worker.log)
        await asyncio.gather(*(faults.wait_ready(w, timeout_s) for w in self.workers.values()))
        return time.monotonic() - t0

    def poll(self) -> None:
        for log in self.logs.values():
            log.poll()

    async def takeover(self, survivor: str, since: float, timeout_s: float) -> dict[str, float]:
        """Seconds from ``since`` until ``survivor``'s worker held, per stage, every
        topic partition that any host's worker of that stage held before; stages
        not taken over within ``timeout_s`` are missing from the answer."""
        self.poll()
        full = {stage: set().union(*(log.held.get(stage, set()) for log in self.logs.values()))
                for stage in faults.stages()}
        done: dict[str, float] = {}
        while time.monotonic() - since < timeout_s and len(done) < len(full):
            self.poll()
            for stage, want in full.items():
                seen, tps = self.logs[survivor].latest.get(stage, (0.0, frozenset()))
                if stage not in done and tps >= want:
                    done[stage] = round(max(0.0, seen - since), 1)
            await asyncio.sleep(0.2)
        return done

    async def rejoined(self, name: str, since: float, timeout_s: float = 120.0) -> Optional[float]:
        """Seconds until every stage of host ``name`` printed an assignment after
        ``since`` (it is back in its groups), or None after ``timeout_s``."""
        while time.monotonic() - since < timeout_s:
            self.poll()
            latest = self.logs[name].latest
            if all(latest.get(s, (0.0,))[0] > since for s in faults.stages()):
                return round(max(t for t, _ in latest.values()) - since, 1)
            await asyncio.sleep(0.2)
        return None

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM the workers (SIGKILL after ``grace_s``), then remove the hosts
        (whatever is left in them is killed).  Never raises."""
        for name, worker in self.workers.items():
            if worker.alive():
                took, clean = faults.sigterm(worker, grace_s)
                if not clean:
                    self.notes.append(f"host {name}'s worker ignored SIGTERM (killed)")
        self.workers.clear()
        self.net.close()


def service_ports(settings: Settings) -> list[int]:
    """Every TCP port of the embedded stack's services (devstack's registry)."""
    import devstack

    return sorted({p for service in devstack.services() for p in service.ports(settings)})


def takeover_limit_s() -> float:
    """The longest a takeover may take: the session timeout, then the group's
    re-forming (see the module docstring)."""
    from streams.broker_quirks import SESSION_TIMEOUT_S

    return SESSION_TIMEOUT_S + REJOIN_ALLOWANCE_S


async def fault_hosts(stack, run) -> None:
    """Cut host a for CUT_S, bring it back, ingest the held-back half, kill host b;
    notes the takeover times and adds a problem for a slow or missing takeover."""
    fleet: HostFleet = stack.hosts
    limit = takeover_limit_s()
    await run.progress(0.3)
    t_cut = time.monotonic()
    await asyncio.to_thread(fleet.net.cut, "a")
    taken = await fleet.takeover("b", t_cut, timeout_s=CUT_S)
    await asyncio.sleep(max(0.0, CUT_S - (time.monotonic() - t_cut)))
    t_back = time.monotonic()
    await asyncio.to_thread(fleet.net.restore, "a")
    _judge(run, "a cut", taken, limit)
    back = await fleet.rejoined("a", t_back)
    dead = [n for n, w in fleet.workers.items() if not w.alive()]
    run.notes.append(f"a back after {CUT_S:.0f}s, rejoined in {back}s"
                     + (f"; workers exited: {dead}" if dead else ""))
    if back is None or dead:
        run.problems.append("host a did not rejoin its groups after the cut")
    await run.ingest(run.held_back)
    await run.progress(0.6)
    late = run.recorder.terminal_count(run.expected) == len(run.expected)
    t_kill = time.monotonic()
    killed = await asyncio.to_thread(fleet.net.kill, "b")
    fleet.workers.pop("b").proc.wait(10)
    taken = await fleet.takeover("a", t_kill, timeout_s=limit + 30.0)
    _judge(run, f"b killed ({killed} processes){' after all terminal' if late else ''}", taken, limit)


def _judge(run, what: str, taken: dict[str, float], limit: float) -> None:
    from drills import faults as _f

    missing = [s for s in _f.stages() if s not in taken]
    worst = max(taken.values(), default=0.0)
    run.notes.append(f"{what}: takeover {worst}s (slowest stage; limit {limit:.0f}s)"
                     + (f", not taken over: {missing}" if missing else ""))
    run.details.setdefault("takeover_s", []).append(worst)
    if missing or worst > limit:
        run.problems.append(f"{what}: partitions not taken over within {limit:.0f}s")


async def lag_drained(settings: Settings, timeout_s: float = 90.0) -> Optional[str]:
    """Wait until every stage group's committed offsets reach its topics' ends;
    returns None, or which stages still lag after ``timeout_s``."""
    from streams.lag import by_stage, read_lag

    end = time.monotonic() + timeout_s
    lagging: dict[str, int] = {}
    while time.monotonic() < end:
        stages = by_stage(await read_lag(settings.kafka_bootstrap))
        lagging = {s: e["lag"] for s, e in stages.items() if e["lag"]}
        if not lagging:
            return None
        await asyncio.sleep(1.0)
    return f"lag did not drain in {timeout_s:.0f}s: {lagging}"
