"""Fair fetching across partitions: a small document's partition is served within one
small poll of a big document's, not after its whole fetched backlog.

Size lanes (topics/lanes.py) put a small document's chunks on another partition than
a big document's.  That is only worth something if the consumer serves partitions in
turn, and two things stood in the way (shown in tests/test_fair_fetch.py):

* **Broker quirk 12**: the embedded broker (tansu) ignores a Fetch request's
  per-partition byte limit (``max_partition_fetch_bytes``): asked for 128 KiB, it
  answered 1,430 records of 4 KB (5.6 MB) from one partition in one fetch.
* aiokafka keeps fetched records per partition in an ordered map and drains it in
  order (``Fetcher.fetched_records``): a partition that still has records left after a
  ``getmany(max_records=n)`` stays first, so the next polls take from it again until
  its fetched backlog is gone, however many other partitions have records waiting.

Together, a small document's chunks fetched a moment after a big document's waited for
all of them (``ragstream bench fairness``, lanes on, before this module: 42 s embed
wait for one of ten small documents behind a 2,000-chunk PDF).

:func:`rotate_partially_drained` (process-wide, idempotent) moves a partition that a
poll left records in to the end of that map, so the next poll starts with the others:
with a small ``max_records`` (the embed app's ``embed_poll_records``,
streams/app.stage_fetch_settings) partitions take turns poll by poll.  Nothing is
reordered within a partition, so commits and per-document order are unchanged.

Lanes first (:func:`prefer_lanes`): on a topic with lanes (topics/lanes.py: the first
half of its partitions for small documents and projects outside a burst, the other
half the bulk lane), the bulk half's fetched partitions go behind the first half's
before each poll, so a single file's events are polled before a backlog's — except
every ``bulk_turn``-th poll of the consumer, which takes partitions in the plain
rotation, so the bulk lane always keeps at least that share of the polls (measured:
``ragstream bench fairness --backlog 200``).
"""
from __future__ import annotations

from typing import Any

from topics.lanes import in_bulk_half

_MARK = "_ragstream_rotates"


def rotate_partially_drained() -> None:
    """Patch ``aiokafka.consumer.fetcher.Fetcher.fetched_records`` so a partition with
    records left after a poll moves behind the other partitions (see the module
    docstring).  Idempotent; affects every consumer of the process."""
    from aiokafka.consumer.fetcher import Fetcher

    if getattr(Fetcher.fetched_records, _MARK, False):
        return
    original = Fetcher.fetched_records

    async def fetched_records(self: Any, partitions: Any, timeout: float = 0,
                              max_records: Any = None) -> dict:
        _bulk_last(self)
        drained = await original(self, partitions, timeout=timeout, max_records=max_records)
        records = self._records  # collections.OrderedDict: TopicPartition -> FetchResult
        for tp in drained:
            if tp in records:
                records.move_to_end(tp)
        return drained

    setattr(fetched_records, _MARK, True)
    fetched_records.__wrapped__ = original  # type: ignore[attr-defined]  (tests compare)
    Fetcher.fetched_records = fetched_records


#: topic names with lanes -> (bulk_turn); filled by :func:`prefer_lanes`
_LANED: dict[str, int] = {}


def prefer_lanes(topics: Any, bulk_turn: int = 4) -> None:
    """Poll the first half of each of ``topics``' partitions (names) before its bulk
    half, but every ``bulk_turn``-th poll of a consumer (0: never prefer); process-wide,
    with :func:`rotate_partially_drained` installed."""
    for name in topics:
        _LANED[name] = bulk_turn


def _bulk_last(fetcher: Any) -> None:
    """Move the fetched partitions of laned topics' bulk halves behind the others
    (see the module docstring); a no-op without laned topics."""
    if not _LANED:
        return
    polls = getattr(fetcher, "_ragstream_polls", 0) + 1
    fetcher._ragstream_polls = polls
    records = fetcher._records
    cluster = fetcher._client.cluster
    for tp in list(records):
        turn = _LANED.get(tp.topic)
        if not turn or polls % turn == 0:
            continue
        if in_bulk_half(tp.partition, len(cluster.partitions_for_topic(tp.topic) or ())):
            records.move_to_end(tp)
