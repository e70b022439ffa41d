"""``ragstream drill``: repeatable fault drills against the real embedded stack.

Each drill ingests a fresh, seeded corpus of N documents (small .txt/.md/.html,
DOCX, multi-page PDFs and one PDF longer than the profile's ``max_pages_per_task``,
so it is split into page ranges) into a fresh project, injects one kind of fault
while the pipeline works, waits until every document's current version is terminal
(or progress stalls / the deadline passes), then checks the delivery promises with
:mod:`drills.checks`:

=================== =========================================================
drill               fault
=================== =========================================================
redeploy            all-in-one ``ragstream worker``; after some documents are
                    COMPLETED it is stopped (SIGTERM) and the Procfile layout
                    (one worker per stage) takes over; documents completed
                    before that must get no stage event afterwards
kill-workers        every stage's worker SIGKILLed once at a random moment and
                    restarted (Procfile layout)
restart-<service>   broker, postgres, milvus, s3, triton: stopped mid-run for
                    ``--outage`` seconds, then started again
new-versions        mid-run, changed bytes of some documents are uploaded under
                    the same names (version 2); only v2 may stay in Milvus
tenants, lifecycle  a sibling project with a colliding name; a reindex, late
                    documents, a rollback and deletes (drills/lifecycle.py);
                    ``leaked`` counts data reachable where it must not be
hosts               workers on two hosts (network namespaces); one cut off the
                    network past the session timeout, another killed; takeover
                    times and drained lag checked too (drills/hosts.py; root)
=================== =========================================================

Workers log to ``{data_dir}/logs/drill/``.  Callbacks go to a receiver on
127.0.0.1 that records every request.  One report line per drill, then
``drills_passed=<n>/<m> lost=<chunks> extra=<chunks> duplicate_completions=<n>
reprocessed=<docs> leaked=<n>``; exit code 0 only when every drill passed.

Size: the drill runner: the run/stack state, the five kinds of fault, the waits and
the verdict share that state; the corpus, the observers, the faults' mechanics and the
checks are already their own modules.
"""
from __future__ import annotations

import asyncio
import json
import random
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Optional, Sequence

from drills import faults
from drills.checks import (RESTART_STATUSES, STAGE_STATUSES, DrillResult, all_terminal,
                           by_version, evaluate, report_json, summary_line)
from drills.corpus import make_corpus
from drills.hosts import HostFleet, fault_hosts, lag_drained, service_ports
from drills.lifecycle import fault_lifecycle, fault_tenants
from drills.observe import Receiver, Recorder
from streams.settings import Settings, get_settings

SERVICES = ("postgres", "milvus", "s3", "triton", "broker")
# redeploy first (a fresh stack: the Procfile groups do not exist yet); the broker
# restart last, so that what an in-memory broker loses cannot spoil the other drills
DRILLS: tuple[str, ...] = ("redeploy", "kill-workers", "new-versions", "tenants", "lifecycle",
                           "hosts", *(f"restart-{s}" for s in SERVICES))  # each one of SPECS


# ------------------------------------------------------------------ drill run
@dataclass
class Options:
    """Command-line options of one ``ragstream drill`` run."""

    docs: int = 30
    seed: int = 1
    outage_s: float = 8.0
    timeout_s: float = 900.0  # per drill, for every version to become terminal
    stall_s: float = 150.0  # no status event of the project for this long → stalled


@dataclass
class Run:
    """State of one drill: its project, corpus, expected versions and recorders."""

    name: str
    project: str
    settings: Settings
    opts: Options
    rng: random.Random
    receiver: Receiver
    recorder: Recorder
    corpus_dir: Path
    expected: dict[str, int] = field(default_factory=dict)
    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reprocess_after: Optional[float] = None
    reprocess_statuses: Sequence[str] = RESTART_STATUSES
    fault_done: bool = False
    leaked: int = 0  # the tenants and lifecycle drills: data found where it must not be
    held_back: list[Path] = field(default_factory=list)  # ingested by the fault itself
    problems: list[str] = field(default_factory=list)  # fail the drill beyond the checks
    details: dict = field(default_factory=dict)  # added to the result's details

    async def ingest(self, paths: Sequence[Path]) -> dict[str, int]:
        """Upload ``paths`` like ``ragstream ingest`` does; returns {doc: version}."""
        from adapters.metadata import Metadata
        from adapters.migrations import upgrade_head
        from adapters.object_store import ObjectStore
        from streams.ingest import ingest_file
        from streams.kafka_io import producer

        out = {}
        await upgrade_head(self.settings.pg_dsn)
        async with ObjectStore(self.settings) as store, Metadata(self.settings.pg_dsn) as md, \
                producer(self.settings.kafka_bootstrap) as prod:
            await store.ensure_bucket()
            for p in paths:
                res = await ingest_file(p, project=self.project, category="default", store=store,
                                        metadata=md, producer=prod,
                                        callback_url=self.receiver.url(self.project))
                if not res.queued:
                    self.notes.append(f"{p.name} not queued ({res.reason})")
                out[res.document_id] = res.version
        self.expected.update(out)
        return out

    async def progress(self, fraction: float, timeout_s: float = 600.0) -> None:
        """Wait until about ``fraction`` of the expected status events arrived (8 per
        document) or every document is terminal."""
        target = fraction * 8 * len(self.expected)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if len(self.recorder.events) >= target or \
                    self.recorder.terminal_count(self.expected) == len(self.expected):
                return
            await asyncio.sleep(0.2)

    async def completed_at_least(self, fraction: float, timeout_s: float = 600.0) -> None:
        """Wait until ``fraction`` of the documents are COMPLETED (or all terminal)."""
        want = max(1, int(fraction * len(self.expected)))
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if len(self.recorder.completed(self.expected)) >= want or \
                    self.recorder.terminal_count(self.expected) == len(self.expected):
                return
            await asyncio.sleep(0.2)


class Stack:
    """What lives across drills: the settings, the receiver, the Procfile fleet."""

    def __init__(self, settings: Settings, opts: Options, workdir: Path):
        self.settings, self.opts, self.workdir = settings, opts, workdir
        self.receiver = Receiver()
        self.fleet: Optional[faults.Fleet] = None
        self.allinone: Optional[faults.Fleet] = None
        self.hosts: Optional[HostFleet] = None  # the hosts drill's worker hosts
        self.stopped_services: set[str] = set()

    async def procfile(self, label: str) -> float:
        """Make sure the Procfile layout runs with every worker alive; returns the
        seconds spent starting workers."""
        if self.fleet is not None and not self.fleet.dead():
            return 0.0
        if self.fleet is not None:
            await asyncio.to_thread(self.fleet.stop)
        self.fleet = faults.Fleet(self.settings, label)
        return await self.fleet.start_procfile()

    async def stop_workers(self) -> list[str]:
        notes = []
        if self.hosts is not None:
            await asyncio.to_thread(self.hosts.stop)
            notes += self.hosts.notes
            self.hosts = None
        for attr in ("allinone", "fleet"):
            fleet = getattr(self, attr)
            if fleet is not None:
                await asyncio.to_thread(fleet.stop)
                notes += fleet.notes
                setattr(self, attr, None)
        return notes

    def close(self) -> list[str]:
        """Synchronous clean-up: stop workers, restore stopped services, close the
        receiver; returns problems found (never raises)."""
        problems = []
        if self.hosts is not None:
            self.hosts.stop()
            problems += self.hosts.notes
            self.hosts = None
        for fleet in (self.allinone, self.fleet):
            if fleet is not None:
                fleet.stop()
                problems += fleet.notes
        self.allinone = self.fleet = None
        for name in sorted(self.stopped_services):
            err = faults.ensure_service_up(self.settings, name)
            if err:
                problems.append(f"could not restore {name}: {err}")
        self.stopped_services.clear()
        self.receiver.close()
        return problems


# -- the drills' faults: each gets the Run after the ingest and returns when done --
async def _fault_kill_workers(stack: Stack, run: Run) -> None:
    specs = list(faults.stages())
    run.rng.shuffle(specs)
    marks = [run.rng.uniform(0.1, 0.7) for _ in specs]

    async def kill_at(spec: str, mark: float) -> None:
        await run.progress(mark)
        late = run.recorder.terminal_count(run.expected) == len(run.expected)
        took = await stack.fleet.kill_and_restart(spec)
        run.notes.append(f"killed {spec}@{mark:.2f}{' (after all terminal)' if late else ''} "
                         f"back in {took:.0f}s")

    # each stage at its own moment; a restart does not delay the other kills
    await asyncio.gather(*(kill_at(s, m) for s, m in zip(specs, marks)))


def _fault_restart(service: str) -> Callable[[Stack, Run], Awaitable[None]]:
    async def fault(stack: Stack, run: Run) -> None:
        mark = run.rng.uniform(0.2, 0.5)
        await run.progress(mark)
        stack.stopped_services.add(service)
        try:
            info = await faults.restart_service(stack.settings, service, stack.opts.outage_s)
        except Exception as exc:  # noqa: BLE001 — note it, try once more
            run.notes.append(f"{service} did not come back: {str(exc)[:200]}")
            err = await asyncio.to_thread(faults.ensure_service_up, stack.settings, service)
            if err:
                raise RuntimeError(f"{service} could not be restarted: {err}") from exc
            info = {"down": "?", "up_s": "?"}
        stack.stopped_services.discard(service)
        run.notes.append(f"{service} down@{mark:.2f} for {stack.opts.outage_s:.0f}s "
                         f"({info['down']}), healthy {info['up_s']}s after start")
    return fault


async def _fault_new_versions(stack: Stack, run: Run) -> None:
    mark = run.rng.uniform(0.2, 0.5)
    await run.progress(mark)
    n = len(run.paths)
    chosen = sorted(run.rng.sample(range(n), max(1, n // 3)))
    paths = make_corpus(run.corpus_dir, stack.opts.docs, stack.opts.seed, revision=2,
                        only=chosen)
    new = await run.ingest(paths)
    run.notes.append(f"v2 of {len(new)} docs @{mark:.2f}")


async def _fault_redeploy(stack: Stack, run: Run) -> None:
    await run.completed_at_least(0.4)
    took, clean = await asyncio.to_thread(faults.sigterm, stack.allinone.workers["all"])
    run.notes.append(f"all-in-one stopped in {took:.1f}s{'' if clean else ' (needed SIGKILL)'} "
                     f"with {len(run.recorder.completed(run.expected))} completed")
    stack.allinone = None
    run.reprocess_after = time.time()
    run.reprocess_statuses = STAGE_STATUSES
    took = await stack.procfile(f"{run.name}")
    run.notes.append(f"procfile ready in {took:.0f}s")


# -- the workers a drill runs against: each returns the seconds spent starting them --
async def _procfile_workers(stack: Stack, run: Run) -> float:
    """The Procfile layout (one worker per stage), kept from the previous drill."""
    return await stack.procfile(run.name)


async def _allinone_workers(stack: Stack, run: Run) -> float:
    """One all-in-one ``ragstream worker`` (the redeploy drill stops it half-way)."""
    if stack.fleet is not None:
        await asyncio.to_thread(stack.fleet.stop)
        stack.fleet = None
    stack.allinone = faults.Fleet(stack.settings, run.name)
    return await stack.allinone.start(["all"])


async def _host_workers(stack: Stack, run: Run) -> float:
    """Workers on hosts of their own (network namespaces), the consumer groups' only
    members: every other worker is stopped first."""
    run.notes += await stack.stop_workers()
    stack.hosts = HostFleet(stack.settings, run.name, [*service_ports(stack.settings), stack.receiver.port])
    return await stack.hosts.start()


@dataclass(frozen=True)
class Drill:
    """One drill: its fault (called after the first ingest, returns when done) and how
    its run differs from the default.

    ``workers`` starts what it runs against (default: the Procfile layout);
    ``held_back_half``: only the corpus's first half is ingested before the fault, which
    ingests the second half itself; ``lag_must_drain``: every consumer group's lag must
    be 0 at the end (drills/hosts.py ``lag_drained``); ``fresh_workers_after``: the
    workers are stopped after the drill and the next one starts its own (a broker
    restart loses an in-memory broker's groups)."""

    fault: Callable[[Stack, Run], Awaitable[None]]
    workers: Callable[[Stack, Run], Awaitable[float]] = _procfile_workers
    held_back_half: bool = False
    lag_must_drain: bool = False
    fresh_workers_after: bool = False


SPECS: dict[str, Drill] = {
    "redeploy": Drill(_fault_redeploy, workers=_allinone_workers),
    "kill-workers": Drill(_fault_kill_workers),
    **{f"restart-{s}": Drill(_fault_restart(s), fresh_workers_after=s == "broker") for s in SERVICES},
    "new-versions": Drill(_fault_new_versions),
    "tenants": Drill(fault_tenants),
    "lifecycle": Drill(fault_lifecycle),
    # the second half after the cut, before the kill (drills/hosts.py)
    "hosts": Drill(fault_hosts, workers=_host_workers, held_back_half=True, lag_must_drain=True),
}


async def _milvus_ids(settings: Settings, project: str) -> dict[str, set[str]]:
    """``{document_id: chunk ids}`` in the project's collection (strong consistency).

    Through :class:`adapters.vector_store.VectorStore` (a dedicated channel with the
    keepalive Milvus Lite accepts, reconnect with backoff): a plain ``MilvusClient``
    here pinged every 10 s, got GOAWAY ``too_many_pings`` from the server during a
    30-document drill run and its background recovery failed (2026-12-02)."""
    from adapters.vector_store import VectorStore, alias_name

    def read(client) -> dict[str, set[str]]:
        alias = alias_name(project)
        if alias not in set(client.list_aliases().get("aliases", [])) \
                and not client.has_collection(alias):
            return {}
        rows = client.query(alias, filter="chunk_index >= 0", output_fields=["chunk_id", "document_id"],
                            limit=16384, consistency_level="Strong")
        out: dict[str, set[str]] = {}
        for r in rows:
            out.setdefault(r["document_id"], set()).add(r["chunk_id"])
        return out

    store = VectorStore(settings.milvus_uri)  # retries a restarted Milvus itself
    try:
        return await asyncio.to_thread(store.run_sync, "query", read)
    finally:
        store.close()


async def _processed_totals(settings: Settings, project: str,
                            expected: dict[str, int]) -> dict[tuple[str, int], int]:
    """Chunk counts from the processed JSON of each expected version (where written)."""
    import orjson

    from adapters.object_keys import processed_key
    from adapters.object_store import ObjectStore

    out = {}
    async with ObjectStore(settings) as store:
        for doc, version in expected.items():
            try:
                body = orjson.loads(await store.get_bytes(processed_key(project, doc, version)))
                out[(doc, version)] = len(body.get("chunks", []))
            except Exception:  # noqa: BLE001 — not written (failed or not reached)
                continue
    return out


async def _topics_led(settings: Settings, timeout_s: float = 60.0) -> None:
    """Wait until every catalogue topic has a leader for each partition (freshly
    created topics on the embedded broker answer UnknownError for a moment)."""
    from aiokafka import TopicPartition

    from streams.kafka_io import producer
    from topics import ALL

    end = time.monotonic() + timeout_s
    async with producer(settings.kafka_bootstrap) as prod:
        while time.monotonic() < end:
            try:
                await prod.client.force_metadata_update()
                cluster = prod.client.cluster
                if all((parts := cluster.partitions_for_topic(t.name)) and
                       all(cluster.leader_for_partition(TopicPartition(t.name, p)) not in (None, -1)
                           for p in parts) for t in ALL):
                    return
            except Exception:  # noqa: BLE001 — keep polling until the deadline
                pass
            await asyncio.sleep(1.0)


async def _wait_terminal(run: Run) -> Optional[str]:
    """Wait for every expected version to be terminal; returns None, or why not
    (stalled / timeout)."""
    t0 = time.monotonic()
    while True:
        waiting = all_terminal(run.expected, run.recorder.events)
        if not waiting:
            return None
        idle = time.monotonic() - run.recorder.last_event
        if idle > run.opts.stall_s:
            return f"stalled: no status event for {idle:.0f}s ({_last_statuses(run, waiting)})"
        if time.monotonic() - t0 > run.opts.timeout_s:
            return f"timeout after {run.opts.timeout_s:.0f}s ({_last_statuses(run, waiting)})"
        await asyncio.sleep(0.5)


def _last_statuses(run: Run, documents: Sequence[str], most: int = 5) -> str:
    """Where the unfinished versions stopped: "doc vN at STATUS" for up to ``most``."""
    versions = by_version(run.recorder.events)
    out = []
    for doc in documents[:most]:
        evs = versions.get((doc, run.expected[doc]), [])
        out.append(f"{doc} v{run.expected[doc]} at {evs[-1].status if evs else 'no event'}")
    return "; ".join(out) + (f"; +{len(documents) - most} more" if len(documents) > most else "")


async def _wait_callbacks(run: Run, timeout_s: float = 150.0) -> None:
    """Wait (bounded) until every terminal expected version has a callback."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        keyed = {((c.body or {}).get("document_id"), (c.body or {}).get("version"))
                 for c in run.receiver.for_project(run.project)}
        if all((d, v) in keyed for d, v in run.expected.items()):
            return
        await asyncio.sleep(0.5)


async def run_drill(stack: Stack, name: str, index: int) -> DrillResult:
    """One drill on a fresh project; never raises (errors become a failed result).
    The Procfile workers are kept for the next drill unless this one stalled,
    crashed or restarted the broker (then they are stopped and started afresh)."""
    from topics.admin import ensure_topics

    opts = stack.opts
    project = f"drill-{name}-{uuid.uuid4().hex[:6]}".replace("restart-", "r-")
    rng = random.Random(f"{opts.seed}:{name}")
    run = Run(name, project, stack.settings, opts, rng, stack.receiver,
              Recorder(stack.settings, project), stack.workdir / project)
    t_start = time.monotonic()
    drill = SPECS[name]
    restart_fleet = drill.fresh_workers_after
    try:
        # every drill starts from a working stack: services up, the catalogue's topics
        # present (an in-memory broker that was restarted comes back without them)
        if err := await asyncio.to_thread(faults.ensure_service_up, stack.settings):
            run.notes.append(f"stack not up before the drill: {err[:200]}")
        if await ensure_topics(stack.settings.kafka_bootstrap, stack.settings.topic_partitions):
            run.notes.append("topics were missing (re-created)")
            await _topics_led(stack.settings)
        took = await drill.workers(stack, run)
        if took:
            run.notes.append(f"workers ready in {took:.0f}s")
        run.recorder.start()
        run.paths = make_corpus(run.corpus_dir, opts.docs, opts.seed)
        if drill.held_back_half:
            run.held_back = run.paths[(len(run.paths) + 1) // 2:]
        t_start = time.monotonic()
        await run.ingest([p for p in run.paths if p not in run.held_back])
        await drill.fault(stack, run)
        why = await _wait_terminal(run)
        if why:
            run.notes.append(why)
            restart_fleet = True
        else:
            await _wait_callbacks(run)
            if drill.lag_must_drain and (why := await lag_drained(stack.settings)):
                run.problems.append(why)
        present = await _milvus_ids(stack.settings, project)
        totals = await _processed_totals(stack.settings, project, run.expected)
        if stack.fleet is not None and (dead := stack.fleet.dead()):
            run.notes.append(f"workers exited: {dead}")
        result = evaluate(name, expected=run.expected, events=run.recorder.events, present=present,
                          callbacks=run.receiver.for_project(project), chunk_totals=totals,
                          reprocess_after=run.reprocess_after,
                          reprocess_statuses=run.reprocess_statuses,
                          seconds=time.monotonic() - t_start, notes=run.notes)
        if not result.callbacks_ok and stack.fleet is not None:  # where notify stood
            result.notes.append(f"notify log: {stack.fleet.last_line('notify', 'assigned')[-160:]}")
        result.leaked = run.leaked
        result.details.update(run.details)
        result.passed = result.passed and not run.leaked and not run.problems
        result.notes += [f"FAILED: {p}" for p in run.problems]
    except Exception as exc:  # noqa: BLE001 — a drill that crashes is a failed drill
        restart_fleet = True
        result = DrillResult(name, seconds=round(time.monotonic() - t_start, 1),
                             notes=[*run.notes, f"error: {type(exc).__name__}: {str(exc)[:300]}"])
    finally:
        await run.recorder.stop()
    result.details["project"] = project
    if restart_fleet or stack.allinone is not None or stack.hosts is not None:
        result.notes += await stack.stop_workers()  # a fresh fleet for the next drill
    return result


def select(only: Optional[str]) -> list[str]:
    """The drills to run, in the default order; raises ValueError for unknown names."""
    if not only:
        return list(DRILLS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in DRILLS]
    if unknown:
        raise ValueError(f"unknown drill(s) {unknown}; choose from {list(DRILLS)}")
    return [n for n in DRILLS if n in names]


async def run_drills(names: Sequence[str], opts: Options, settings: Settings,
                     echo: Callable[[str], None] = print) -> list[DrillResult]:
    """Start the stack if needed and run the named drills one after another."""
    import devstack
    from topics.admin import ensure_topics

    await asyncio.to_thread(devstack.up, settings, timeout_s=240.0)
    await ensure_topics(settings.kafka_bootstrap, settings.topic_partitions)
    workdir = settings.data_dir / "drill"
    stack = Stack(settings, opts, workdir)
    results = []
    try:
        for i, name in enumerate(names):
            result = await run_drill(stack, name, i)
            results.append(result)
            echo(result.line())
    finally:
        for problem in await asyncio.to_thread(stack.close):
            echo(f"cleanup: {problem}")
    return results


def drill_main(docs: int, only: Optional[str], seed: int, json_out: bool,
               outage_s: float, timeout_s: float, stall_s: float) -> int:
    """The ``ragstream drill`` command; returns the exit code (0 = all passed,
    1 = a drill failed, 2 = bad arguments)."""
    try:
        names = select(only)
    except ValueError as exc:
        print(exc)
        return 2
    if docs < 1:
        print("--docs must be at least 1")
        return 2
    settings = get_settings()
    opts = Options(docs=docs, seed=seed, outage_s=outage_s, timeout_s=timeout_s, stall_s=stall_s)
    t0 = time.time()
    # SIGTERM behaves like Ctrl-C: the finally blocks stop workers, restore services
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    results: list[DrillResult] = []
    try:
        results = asyncio.run(run_drills(names, opts, settings))
    except KeyboardInterrupt:
        print("interrupted")
    if json_out:
        json_path = settings.data_dir / "drill" / "report.json"
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(report_json(results, docs=docs, seed=seed, drills=names,
                                         seconds=round(time.time() - t0, 1),
                                         stack=str(settings.data_dir)))
        print(f"report: {json_path}")
    print(summary_line(results))
    return 0 if results and len(results) == len(names) and all(r.passed for r in results) else 1
