"""Per-stage profile of one pipeline run, derived from what the pipeline already records.

Two sources, no timing code in the agents:

1. **Per-document timeline** from timestamps the pipeline writes anyway: each stage
   emits a status event (``StatusEvent.at``, Unix seconds) when it starts on a
   document (NORMALIZING, PARTITIONING, CHUNKING, ENHANCING, EMBEDDING, INDEXING;
   COMPLETED/FAILED at the end), and every record on a stage topic carries the
   broker's record timestamp (producer CreateTime, ms) — the moment the previous
   stage handed it on.  For document *d*:

   - stage work  = its last output record's timestamp − the stage's status event
     (index: COMPLETED − INDEXING);
   - topic wait  = the next stage's status event − the first record on its input topic
     (``uploads`` wait: NORMALIZING − the upload record).

   ``normalize`` is reported as ``convert`` for documents whose normalized type is PDF
   while the file name says an Office format (LibreOffice conversion happens inside
   normalize); ``partition`` is split by the strategies that the elements record
   (``metadata.partition_strategy``: fast / ocr_only / hi_res; ``native:<type>`` for
   formats parsed without a PDF strategy).  Figures are summed over documents
   (document-seconds): stages run concurrently, so they add up to more than the wall
   time.

2. **Stage busy seconds** from the workers' Prometheus histogram
   ``ragstream_stage_seconds`` (``streams/metrics.py`` STAGE_SECONDS, one series per
   stage, served on ``RAGSTREAM_METRICS_PORT`` + stage position): the difference of
   its ``_sum``/``_count`` between two scrapes is the seconds the stage process spent
   in handler calls (batches for enhance/embed/index) during the run.
"""
from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Optional

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from devstack.ports import free_port_block

if TYPE_CHECKING:
    from bench.cpu import CpuShare

STAGE_ORDER = ("normalize", "convert", "partition", "chunk", "enhance", "embed", "index")
OFFICE_SUFFIXES = (".doc", ".docx", ".ppt", ".pptx", ".xls", ".xlsx", ".odt", ".odp", ".ods", ".rtf")


# ---------------------------------------------------------------------------- metrics

def scrape_stage_seconds(base_port: int, stages: Iterable[str],
                         host: str = "127.0.0.1") -> dict[str, tuple[float, float]]:
    """``{stage: (seconds_sum, calls)}`` of ``ragstream_stage_seconds`` as each stage
    process serves it (port ``streams.worker.stage_metrics_port(base_port, stage)``);
    a stage whose endpoint does not answer, or that has no observation yet, is (0, 0)."""
    from prometheus_client.parser import text_string_to_metric_families

    from streams.worker import stage_metrics_port

    out: dict[str, tuple[float, float]] = {}
    for stage in stages:
        total = calls = 0.0
        url = f"http://{host}:{stage_metrics_port(base_port, stage)}/metrics"
        try:
            text = urllib.request.urlopen(url, timeout=5).read().decode()
        except (urllib.error.URLError, OSError):
            out[stage] = (0.0, 0.0)
            continue
        for fam in text_string_to_metric_families(text):
            if fam.name != "ragstream_stage_seconds":
                continue
            for s in fam.samples:
                if s.labels.get("stage") != stage:
                    continue
                if s.name.endswith("_sum"):
                    total += s.value
                elif s.name.endswith("_count"):
                    calls += s.value
        out[stage] = (total, calls)
    return out


def busy_delta(before: dict[str, tuple[float, float]],
               after: dict[str, tuple[float, float]]) -> dict[str, tuple[float, int]]:
    """Per stage: (seconds, calls) observed between two scrapes."""
    return {s: (after[s][0] - before.get(s, (0.0, 0.0))[0],
                int(after[s][1] - before.get(s, (0.0, 0.0))[1])) for s in after}


# ---------------------------------------------------------------------------- timeline

@dataclass
class DocTimeline:
    """What one document left behind: status event times (s) and, per topic, the
    first and last record timestamps (s) of its records there."""

    document_id: str
    filename: str = ""
    filetype: str = ""                       # from the partition task (after normalize)
    status_at: dict[str, float] = field(default_factory=dict)   # first event per status
    topic_first: dict[str, float] = field(default_factory=dict)
    topic_last: dict[str, float] = field(default_factory=dict)
    elements_keys: list[tuple[str, str]] = field(default_factory=list)  # (bucket, key)
    strategy: str = ""

    def see(self, topic: str, ts: float) -> None:
        self.topic_first[topic] = min(ts, self.topic_first.get(topic, ts))
        self.topic_last[topic] = max(ts, self.topic_last.get(topic, ts))

    @property
    def converted(self) -> bool:
        return self.filetype == "pdf" and self.filename.lower().endswith(OFFICE_SUFFIXES)


# stage → (start status, output topic short name or None for index, input topic, start of wait)
_STEPS = (
    ("normalize", "NORMALIZING", "partition-tasks", "uploads"),
    ("partition", "PARTITIONING", "elements", "partition-tasks"),
    ("chunk", "CHUNKING", "chunks", "elements"),
    ("enhance", "ENHANCING", "enhanced-chunks", "chunks"),
    ("embed", "EMBEDDING", "embeddings", "enhanced-chunks"),
    ("index", "INDEXING", None, "embeddings"),
)


def stage_intervals(doc: DocTimeline) -> tuple[dict[str, float], dict[str, float]]:
    """``(work, wait)`` seconds of one document: work per stage label (normalize or
    convert; ``partition[<strategy>]``; chunk; enhance; embed; index) and wait per
    input topic.  Intervals whose ends are missing (a failed document) are left out;
    negative ones (clock granularity) count as 0."""
    work: dict[str, float] = {}
    wait: dict[str, float] = {}
    for stage, status, out_topic, in_topic in _STEPS:
        start = doc.status_at.get(status)
        if start is None:
            continue
        if in_topic in doc.topic_first:
            wait[in_topic] = max(0.0, start - doc.topic_first[in_topic])
        end = doc.topic_last.get(out_topic) if out_topic else doc.status_at.get("COMPLETED")
        if end is None:
            continue
        label = stage
        if stage == "normalize" and doc.converted:
            label = "convert"
        elif stage == "partition":
            label = f"partition[{doc.strategy or '?'}]"
        work[label] = max(0.0, end - start)
    return work, wait


async def _timelines(settings, project: str, timeout_s: float = 60.0) -> dict[str, DocTimeline]:
    """Every document of ``project`` with its status times and topic record times,
    read from the topics up to their end offsets (streams.kafka_io.read_topic)."""
    from streams.kafka_io import read_topic
    from topics import (CHUNKS, ELEMENTS, EMBEDDINGS, ENHANCED, PAGE_RANGES, PARTITION_TASKS, STATUS,
                        UPLOADS)

    docs: dict[str, DocTimeline] = {}
    for spec in (UPLOADS, PARTITION_TASKS, PAGE_RANGES, ELEMENTS, CHUNKS, ENHANCED, EMBEDDINGS, STATUS):
        # a split document's page ranges count as its partition tasks
        short = "partition-tasks" if spec is PAGE_RANGES else spec.name.removeprefix("ragstream.")
        async for msg in read_topic(settings.kafka_bootstrap, spec.name, timeout_s=timeout_s):
            try:
                rec = orjson.loads(msg.value) if msg.value else None
            except orjson.JSONDecodeError:
                continue
            if not isinstance(rec, dict) or rec.get("project") != project or "document_id" not in rec:
                continue
            doc = docs.setdefault(rec["document_id"], DocTimeline(rec["document_id"]))
            doc.filename = doc.filename or rec.get("filename", "")
            if spec is STATUS:
                at = float(rec.get("at") or 0.0)
                doc.status_at[rec["status"]] = min(at, doc.status_at.get(rec["status"], at))
                continue
            doc.see(short, msg.timestamp / 1000.0)
            if spec is PARTITION_TASKS or spec is PAGE_RANGES:
                doc.filetype = rec.get("filetype", "")
            elif spec is ELEMENTS:
                doc.elements_keys.append((rec.get("bucket", ""), rec["elements_key"]))
    return docs


def strategy_label(elements: list[dict], filetype: str) -> str:
    """The partition strategies ``elements`` record (``metadata.partition_strategy``),
    joined with ``+`` in a fixed order; ``native:<filetype>`` when none records one."""
    seen = {(e.get("metadata") or {}).get("partition_strategy") for e in elements} - {None}
    if not seen:
        return f"native:{filetype or '?'}"
    order = ("fast", "hi_res", "ocr_only")
    return "+".join(sorted(seen, key=lambda s: (order.index(s) if s in order else 9, s)))


async def _label_strategies(settings, docs: dict[str, DocTimeline]) -> None:
    from adapters.object_store import ObjectStore

    async with ObjectStore(settings) as store:
        for doc in docs.values():
            elements: list[dict] = []
            for bucket, key in doc.elements_keys:
                elements += orjson.loads(await store.get_bytes(key, bucket=bucket or None))
            doc.strategy = strategy_label(elements, doc.filetype)


# ---------------------------------------------------------------------------- profile

@dataclass
class Profile:
    """Summed over the run's documents: work seconds per stage label, documents per
    label, wait seconds per topic; ``busy``: per stage (seconds, calls) from the
    metrics (empty when not scraped); ``wall_s``: the run's wall time."""

    work: dict[str, float]
    docs: dict[str, int]
    wait: dict[str, float]
    busy: dict[str, tuple[float, int]]
    wall_s: float
    documents: int
    cpu: Optional["CpuShare"] = None  # mean cores per service / stage process tree


def summarize(timelines: Iterable[DocTimeline], busy: Optional[dict[str, tuple[float, int]]],
              wall_s: float) -> Profile:
    """Sum :func:`stage_intervals` over documents."""
    work: dict[str, float] = defaultdict(float)
    docs: dict[str, int] = defaultdict(int)
    wait: dict[str, float] = defaultdict(float)
    n = 0
    for doc in timelines:
        n += 1
        w, q = stage_intervals(doc)
        for k, v in w.items():
            work[k] += v
            docs[k] += 1
        for k, v in q.items():
            wait[k] += v
    return Profile(dict(work), dict(docs), dict(wait), dict(busy or {}), wall_s, n)


def collect_profile(settings, project: str, wall_s: float,
                    busy: Optional[dict[str, tuple[float, int]]] = None) -> Profile:
    """Read ``project``'s timelines from the topics and object storage and summarize."""
    async def _go() -> dict[str, DocTimeline]:
        docs = await _timelines(settings, project)
        await _label_strategies(settings, docs)
        return docs

    return summarize(asyncio.run(_go()).values(), busy, wall_s)


def _order(label: str) -> tuple[int, str]:
    base = label.split("[", 1)[0]
    return (STAGE_ORDER.index(base) if base in STAGE_ORDER else 99, label)


def print_profile(profile: Profile, console: Console) -> None:
    """Two tables (stage work, topic wait) and one ``profile_<label>_s=`` line per row
    (document-seconds; ``profile_wait_s`` the total wait in topics)."""
    table = Table("stage", "docs", "doc-seconds", "s/doc", "busy s (metrics)", "calls",
                  title=f"per-stage profile ({profile.documents} documents, wall {profile.wall_s:.1f} s)")
    for label in sorted(profile.work, key=_order):
        secs, n = profile.work[label], profile.docs[label]
        stage = label.split("[", 1)[0]
        busy = profile.busy.get("normalize" if stage == "convert" else stage)
        show_busy = bool(busy) and label == _first_of(profile, stage)
        table.add_row(escape(label), str(n), f"{secs:.2f}", f"{secs / n:.2f}" if n else "-",
                      f"{busy[0]:.2f}" if show_busy else "", str(busy[1]) if show_busy else "")
    console.print(table)
    waits = Table("waiting in topic", "doc-seconds", title="time between a record's arrival and its stage starting")
    for topic, secs in sorted(profile.wait.items(), key=lambda kv: -kv[1]):
        waits.add_row(topic, f"{secs:.2f}")
    console.print(waits)
    for label in sorted(profile.work, key=_order):
        print(f"profile_{label.replace('[', '_').replace(']', '').replace(':', '_').replace('+', '_')}_s="
              f"{profile.work[label]:.2f}")
    print(f"profile_wait_s={sum(profile.wait.values()):.2f}")
    if profile.cpu is not None:
        console.print(f"CPU during the run: {profile.cpu.line()}", highlight=False)
        for name, cores in sorted(profile.cpu.by_component.items()):
            print(f"cpu_{name.replace(':', '_')}_s={cores * profile.cpu.seconds:.2f}")
        print(f"cpu_machine_s={profile.cpu.busy_cores * profile.cpu.seconds:.2f}")


def _first_of(profile: Profile, stage: str) -> Optional[str]:
    """The first label (in print order) of ``stage`` — where its busy seconds are shown
    (normalize's busy time covers convert too, partition's all strategies)."""
    family = ("normalize", "convert") if stage in ("normalize", "convert") else (stage,)
    labels = sorted((lb for lb in profile.work if lb.split("[", 1)[0] in family), key=_order)
    return labels[0] if labels else None


class StageProbe:
    """The metrics side of a profiled run: ``env`` (give it to the worker: a free
    block of metrics ports), :meth:`mark` (scrape before the timed run, after the
    warm-up), :meth:`profile` (scrape again while the worker still runs, then read
    the timelines)."""

    def __init__(self) -> None:
        from streams.app import STAGES

        self.stages = tuple(s for s in STAGES if s in STAGE_ORDER)
        self.base_port = free_port_block(len(STAGES))
        self.env = {"RAGSTREAM_METRICS_PORT": str(self.base_port)}
        self._before: dict[str, tuple[float, float]] = {}
        self._meter = None  # a bench.cpu.CpuMeter once watch() was called
        self._polling = None

    def watch(self, worker_pid: int, data_dir) -> None:
        """Also measure CPU from :meth:`mark` to :meth:`profile`: each dev-stack service
        (pid files under ``data_dir``) and each stage process of the worker
        ``worker_pid`` with its parse processes (``stage:<name>``), polled every second."""
        from bench.cpu import CpuMeter, service_pids

        from streams.app import STAGES

        components = {name: (lambda pid=pid: [pid]) for name, pid in service_pids(data_dir).items()}
        for stage in STAGES:
            components[f"stage:{stage}"] = lambda s=stage: _stage_pids(worker_pid, s)
        self._meter = CpuMeter(components)

    def mark(self) -> None:
        self._before = scrape_stage_seconds(self.base_port, self.stages)
        if self._meter is not None:
            import threading

            self._meter.start()
            self._polling = threading.Event()

            def poll() -> None:
                while not self._polling.wait(1.0):
                    self._meter.poll()

            threading.Thread(target=poll, name="cpu-poll", daemon=True).start()

    def profile(self, settings, project: str, wall_s: float) -> Profile:
        busy = busy_delta(self._before, scrape_stage_seconds(self.base_port, self.stages))
        cpu = None
        if self._meter is not None and self._polling is not None:
            self._polling.set()
            cpu = self._meter.stop()
        result = collect_profile(settings, project, wall_s, busy)
        result.cpu = cpu
        return result


def _stage_pids(worker_pid: int, stage: str) -> list[int]:
    """Pids of ``worker_pid``'s children that run ``stage`` (``--stages <stage>``)."""
    import psutil

    try:
        children = psutil.Process(worker_pid).children()
    except psutil.Error:
        return []
    out = []
    for child in children:
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        if "--stages" in argv and argv[argv.index("--stages") + 1:][:1] == [stage]:
            out.append(child.pid)
    return out
