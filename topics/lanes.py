"""Size lanes: small documents' chunks on partitions of their own, so they never queue
behind a big document's chunks.

Kafka serves a partition in order.  Keyed by document id alone, a one-page document
whose id hashes to the partition of a 3,000-chunk report waits until every chunk of
the report ahead of it is embedded (measured before lanes: 4 minutes between
ENHANCING and EMBEDDING on the held-out set, issue 26).  With lanes, the chunks of a
document with at most ``small_chunks`` chunks go to the *small lane* — the first half
of the topic's partitions (at least one) — and a bigger document's to the *bulk lane*,
the other half; within its lane a document still has one partition, picked by CRC-32
of its id (the same on every worker and every redelivery), so its chunks stay in
order.  The consumer round-robins over its partitions (Faust's scheduler), and the
embed app fetches little per partition (``embed_fetch_max_bytes``) and buffers little
(``embed_stream_buffer``), so a small document's chunks are at most one fetch and one
buffer behind.

Used for ``chunks`` (agents/chunk.py) and ``enhanced-chunks`` (agents/enhance.py).
Replays and reindexes read every partition, so they are unaffected.

Project lanes (:func:`burst_lane`): a project with more than ``fair_project_burst``
versions in flight (registered in the last ``fair_project_window_s`` seconds and not
finished) is uploading in bulk; its next uploads are marked ``bulk`` and every topic of their way
(``uploads``, ``partition-tasks``, ``elements`` — where a split document is bulk too —
and the chunk topics) puts them in the bulk half, so
another project's single file, in the other half, is never queued behind the
backlog (issue 26: one tenant's 200-document upload made another's file wait for
all 200).  The mark travels on the records (``UploadEvent.bulk`` →
``PartitionTask.bulk`` → ``ElementsReady.bulk`` → ``Chunk.bulk``).  Events of one
document may then sit in two lanes (a bulk v1, an interactive v2 or delete): the
stages' guard skips a superseded or deleted version whatever the order, as it does
for redeliveries (agents/runner.py).
"""
from __future__ import annotations

import zlib
from typing import Optional


def lane_partition(document_id: str, chunks_total: int, partitions: int,
                   small_chunks: int, bulk: bool = False) -> Optional[int]:
    """The partition for a chunk of ``document_id`` (of ``chunks_total`` chunks) on a
    topic of ``partitions`` partitions, or None to let the key pick (lanes off:
    ``small_chunks`` <= 0, or fewer than 2 partitions).

    Small lane (``chunks_total <= small_chunks`` and not ``bulk``, a project's burst):
    partitions ``[0, max(1, p // 2))``; bulk lane: the rest.  Raises ValueError for a
    negative ``chunks_total``."""
    if chunks_total < 0:
        raise ValueError(f"chunks_total must be >= 0, got {chunks_total}")
    if small_chunks <= 0:
        return None
    return half_partition(document_id, bulk or chunks_total > small_chunks, partitions)


def half_partition(document_id: str, bulk: bool, partitions: int) -> Optional[int]:
    """``document_id``'s partition in the bulk half (``bulk``) or the other half of a
    topic of ``partitions`` partitions: CRC-32 of the id within the half, the same on
    every worker and every redelivery; None (the key picks) below 2 partitions."""
    if partitions < 2:
        return None
    small = _first_half(partitions)
    pick = zlib.crc32(document_id.encode("utf-8"))
    return small + pick % (partitions - small) if bulk else pick % small


def in_bulk_half(partition: int, partitions: int) -> bool:
    """True when ``partition`` of a topic of ``partitions`` partitions is in the bulk
    half that :func:`half_partition` uses (never below 2 partitions)."""
    return partitions >= 2 and partition >= _first_half(partitions)


def _first_half(partitions: int) -> int:
    """Partitions in the first (small/interactive) lane: ``max(1, partitions // 2)``."""
    return max(1, partitions // 2)


def burst_lane(in_flight: int, burst: int) -> bool:
    """True (bulk lane) when a project's versions in flight, ``in_flight`` (this one
    included), exceed ``burst`` (the ``fair_project_burst`` setting; 0 turns project
    lanes off)."""
    return burst > 0 and in_flight > burst
