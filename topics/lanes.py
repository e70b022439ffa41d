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
"""
from __future__ import annotations

import zlib
from typing import Optional


def lane_partition(document_id: str, chunks_total: int, partitions: int,
                   small_chunks: int) -> Optional[int]:
    """The partition for a chunk of ``document_id`` (of ``chunks_total`` chunks) on a
    topic of ``partitions`` partitions, or None to let the key pick (lanes off:
    ``small_chunks`` <= 0, or fewer than 2 partitions).

    Small lane (``chunks_total <= small_chunks``): partitions ``[0, max(1, p // 2))``;
    bulk lane: the rest.  Raises ValueError for a negative ``chunks_total``."""
    if chunks_total < 0:
        raise ValueError(f"chunks_total must be >= 0, got {chunks_total}")
    if small_chunks <= 0 or partitions < 2:
        return None
    small = max(1, partitions // 2)
    pick = zlib.crc32(document_id.encode("utf-8"))
    if chunks_total <= small_chunks:
        return pick % small
    return small + pick % (partitions - small)
