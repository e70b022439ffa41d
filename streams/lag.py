"""Consumer lag: the one module that computes it (``ragstream lag``, ``/v1/stats``,
the workers' Prometheus gauges and the autoscaler all read it from here).

For each stage, its consumer group ``ragstream-<stage>`` (streams/app.py) and the
topics it consumes (topics/catalogue.py ``stage_sources``), one row per partition:

* ``committed``: the offset the group committed (``None``: nothing committed; a new
  group starts at the earliest retained record, ``consumer_auto_offset_reset``);
* ``end``: the next offset to be written, from the high watermark of a Fetch
  (:func:`streams.broker_quirks.partition_heads`; the embedded broker answers
  ListOffsets too low, quirk 5);
* ``lag`` = ``end - position`` (messages), where the position is the committed
  offset, or the first retained record's offset when nothing is committed;
* ``oldest_age_s``: seconds since the timestamp of the record at the position (the
  oldest record the group has not processed); 0 when the lag is 0;
* ``group_exists``: the broker lists the group (the embedded broker lists a group
  only once it has committed an offset: a stage still on its first event shows
  False).

The same Fetch that gives the end offsets returns the record at the position, so
one refresh is one ListGroups, one OffsetFetch per group and one Fetch round.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Optional, Sequence

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams import broker_quirks
from streams.app import GROUP_PREFIX, STAGES
from topics import STAGE_TOPICS, stage_sources

LEGACY_GROUP = "ragstream"  # the all-stages group of early deployments (/v1/stats reports it)


@dataclass(frozen=True)
class LagTarget:
    """One consumer group reading one topic on behalf of ``stage``."""

    stage: str
    group: str
    topic: str


@dataclass(frozen=True)
class PartitionLag:
    """Lag of one group on one partition (offsets in messages, age in seconds)."""

    stage: str
    group: str
    topic: str
    partition: int
    committed: Optional[int]
    end: int
    lag: int
    oldest_age_s: float
    group_exists: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def stage_targets(stages: Iterable[str] = STAGES, legacy: bool = False) -> list[LagTarget]:
    """The group and each input topic of every stage that consumes a topic (every stage
    today; the partition stage two, ``topics.stage_sources``), in pipeline order; ``legacy`` adds the old all-stages group ``ragstream``."""
    out = []
    for stage in stages:
        if stage not in STAGE_TOPICS:
            continue
        for spec in stage_sources(stage):  # the partition stage reads two topics
            out.append(LagTarget(stage, GROUP_PREFIX + stage, spec.name))
            if legacy:
                out.append(LagTarget(stage, LEGACY_GROUP, spec.name))
    return out


class LagReader:
    """Long-lived broker clients for repeated lag reads (a worker's refresh task, the
    autoscaler).  ``async with LagReader(bootstrap) as r: rows = await r.read(targets)``.
    """

    def __init__(self, bootstrap: str, request_timeout_ms: int = 8000):
        self.bootstrap = bootstrap
        self.request_timeout_ms = request_timeout_ms

    async def __aenter__(self) -> "LagReader":
        self._admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap,
                                          request_timeout_ms=self.request_timeout_ms)
        await self._admin.start()
        try:
            # metadata, and the Fetch rounds of broker_quirks.partition_heads
            self._meta = broker_quirks.fetch_consumer(self.bootstrap)
            await self._meta.start()
        except BaseException:
            await self._admin.close()
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            await self._meta.stop()
        finally:
            await self._admin.close()

    async def partitions(self, topic: str) -> list[int]:
        """Partition numbers of ``topic`` (fresh metadata); [] when it does not exist."""
        await self._meta.topics()  # refreshes the cluster metadata
        return sorted(self._meta.partitions_for_topic(topic) or ())

    async def read(self, targets: Sequence[LagTarget]) -> list[PartitionLag]:
        """One row per (target, partition), in the order of ``targets``.

        Raises ``TimeoutError`` (broker not answering), aiokafka errors otherwise.
        """
        groups = {g for g, *_ in await self._admin.list_consumer_groups()}
        await self._meta.topics()
        parts: dict[str, list[TopicPartition]] = {}
        committed: dict[tuple[str, TopicPartition], Optional[int]] = {}
        for t in targets:
            if t.topic not in parts:
                parts[t.topic] = [TopicPartition(t.topic, p)
                                  for p in sorted(self._meta.partitions_for_topic(t.topic) or ())]
            offsets = {}
            if t.group in groups and parts[t.topic]:
                offsets = await self._admin.list_consumer_group_offsets(
                    t.group, partitions=parts[t.topic])
            for tp in parts[t.topic]:
                meta = offsets.get(tp)
                committed[(t.group, tp)] = meta.offset if meta is not None and meta.offset >= 0 else None
        # one Fetch round per distinct position: a partition read by two groups at
        # different offsets needs two; a TopicPartition can be assigned once per client
        wanted: dict[tuple[TopicPartition, Optional[int]], None] = {}
        for (group, tp), pos in committed.items():
            wanted[(tp, pos)] = None
        rounds: list[dict[TopicPartition, Optional[int]]] = []
        for tp, pos in wanted:
            for r in rounds:
                if tp not in r:
                    r[tp] = pos
                    break
            else:
                rounds.append({tp: pos})
        heads: dict[tuple[TopicPartition, Optional[int]], broker_quirks.PartitionHead] = {}
        for r in rounds:
            for tp, head in (await broker_quirks.partition_heads(self.bootstrap, r, self._meta)).items():
                heads[(tp, r[tp])] = head
        now_ms = time.time() * 1000
        rows = []
        for t in targets:
            for tp in parts[t.topic]:
                pos = committed[(t.group, tp)]
                head = heads[(tp, pos)]
                start = pos if pos is not None else (head.offset if head.offset is not None else head.end)
                lag = max(0, head.end - start)
                age = 0.0
                if lag and head.timestamp_ms is not None:
                    age = max(0.0, (now_ms - head.timestamp_ms) / 1000)
                rows.append(PartitionLag(t.stage, t.group, t.topic, tp.partition, pos, head.end, lag,
                                         round(age, 3), t.group in groups))
        return rows


async def read_lag(bootstrap: str, targets: Optional[Sequence[LagTarget]] = None) -> list[PartitionLag]:
    """:meth:`LagReader.read` with clients opened for this one call (default targets:
    every stage's own group, :func:`stage_targets`)."""
    async with LagReader(bootstrap) as reader:
        return await reader.read(stage_targets() if targets is None else targets)


def by_stage(rows: Iterable[PartitionLag]) -> dict[str, dict[str, Any]]:
    """Sum rows per stage and group: ``{stage: {"topic", "end", "groups": {group:
    lag}, "lag": max over existing groups or None, "oldest_age_s": max}}``, the
    ``/v1/stats`` shape.  Groups that do not exist on the broker are left out."""
    out: dict[str, dict[str, Any]] = {}
    ends: dict[tuple[str, str], dict[int, int]] = {}
    for row in rows:
        entry = out.setdefault(row.stage, {"topic": row.topic, "end": 0, "groups": {},
                                           "lag": None, "oldest_age_s": None})
        ends.setdefault((row.stage, row.topic), {})[row.partition] = row.end
        if not row.group_exists:
            continue
        entry["groups"][row.group] = entry["groups"].get(row.group, 0) + row.lag
        entry["oldest_age_s"] = max(entry["oldest_age_s"] or 0.0, row.oldest_age_s)
    for (stage, _topic), per_part in ends.items():
        out[stage]["end"] = sum(per_part.values())
        if out[stage]["groups"]:
            out[stage]["lag"] = max(out[stage]["groups"].values())
    return out


@dataclass
class IdleBackoff:
    """Whether a stage's lag refresh is due: always, unless the last refresh saw no lag,
    the stage has handled no event since, and less than ``idle_every_s`` seconds have
    passed (0: always due).  Each refresh is a Fetch round over the stage's partitions,
    which the embedded broker answers by listing each partition's objects (broker
    quirk 6); an idle stack need not ask every few seconds that nothing changed.
    ``events``: the stage's handled-event count (:func:`stage_events`); times in
    seconds of one monotonic clock."""

    idle_every_s: float
    at: Optional[float] = None
    lag: int = -1
    events: float = -1.0

    def due(self, now: float, events: float) -> bool:
        """True when a refresh should run now."""
        if self.idle_every_s <= 0 or self.at is None or self.lag != 0 or events != self.events:
            return True
        return now - self.at >= self.idle_every_s

    def refreshed(self, now: float, events: float, lag: int) -> None:
        """Record a refresh at ``now`` that read ``lag`` messages in all."""
        self.at, self.events, self.lag = now, events, lag


def stage_events(stage: str) -> float:
    """Events ``stage`` has handled in this process, any outcome (``ragstream_stage_events_total``)."""
    from streams.metrics import STAGE_EVENTS

    return sum(sample.value for metric in STAGE_EVENTS.collect() for sample in metric.samples
               if sample.name.endswith("_total") and sample.labels.get("stage") == stage)


def install_lag_gauges(app: Any, stage: str, bootstrap: str, every_s: float, idle_every_s: float = 0.0) -> None:
    """Refresh ``ragstream_consumer_lag`` and ``..._oldest_age_seconds`` (streams/
    metrics.py) for ``stage``'s own group every ``every_s`` seconds, from a timer of
    the Faust ``app`` (0: do nothing); while the stage is idle (no lag, no event since)
    only every ``idle_every_s`` seconds (:class:`IdleBackoff`).  A failed read is logged
    and retried next time with fresh clients; the gauges keep their last values meanwhile."""
    import logging

    from streams.metrics import CONSUMER_LAG, CONSUMER_LAG_AGE

    if every_s <= 0:
        return
    log = logging.getLogger("ragstream.lag")
    held: dict[str, LagReader] = {}
    targets = stage_targets([stage])
    backoff = IdleBackoff(idle_every_s)

    @app.timer(interval=every_s, name=f"ragstream-lag-{stage}")
    async def _refresh_lag() -> None:
        now, events = time.monotonic(), stage_events(stage)
        if not backoff.due(now, events):
            return
        try:
            if "reader" not in held:
                held["reader"] = await LagReader(bootstrap).__aenter__()
            rows = await held["reader"].read(targets)
        except Exception as exc:  # noqa: BLE001 — a broker blip must not stop the worker
            log.warning("lag refresh for %s failed: %s: %s", stage, type(exc).__name__, exc)
            reader = held.pop("reader", None)
            if reader is not None:
                try:
                    await reader.__aexit__(None, None, None)
                except Exception:  # noqa: BLE001
                    pass
            return
        for r in rows:
            CONSUMER_LAG.labels(stage, str(r.partition)).set(r.lag)
            CONSUMER_LAG_AGE.labels(stage, str(r.partition)).set(r.oldest_age_s)
        backoff.refreshed(now, events, sum(r.lag for r in rows))
