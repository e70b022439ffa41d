"""The topic catalogue: every topic's name, partitions, retention and compaction, and
which stage consumes and produces each (``STAGE_TOPICS``).

Nothing else in ragstream spells a topic name.  Read top to bottom, the catalogue is
the pipeline::

    uploads ─normalize→ partition-tasks, page-ranges ─partition→ elements ─chunk→ chunks
      ─enhance→ enhanced-chunks ─embed→ embeddings ─index→ (Milvus)
    every stage ─→ status (compacted changelog) ─→ projection (PostgreSQL, dashboards), notify (callbacks)
    permanent failures ─→ dead-letters

All topics are keyed by document id, so one document's events stay in order on one
partition.  Exceptions: the page-range tasks of a split document go to ``page-ranges``
(a lane apart from whole documents, read by a second agent of the partition stage),
round-robin over its partitions so that several partition workers share the document;
and a document's chunks go to the small or the bulk half of ``chunks`` and
``enhanced-chunks`` by its size (topics/lanes.py), one partition per document.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from schemas import (
    Chunk,
    DeadLetter,
    ElementsReady,
    EmbeddedChunk,
    PartitionTask,
    StatusEvent,
    UploadEvent,
)

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    """One topic: ``name`` on the broker, its value record, partitions (None: the
    ``topic_partitions`` setting), retention in ms (-1: forever) and compaction."""

    name: str
    value_type: type
    description: str
    partitions: Optional[int] = None
    retention_ms: int = 7 * DAY_MS
    compacted: bool = False

    def config(self, min_insync_replicas: int = 0) -> dict[str, str]:
        """Broker topic configs (``cleanup.policy``, ``retention.ms``, and
        ``min.insync.replicas`` when given; 0 leaves the broker's default)."""
        config = {
            "cleanup.policy": "compact" if self.compacted else "delete",
            "retention.ms": str(self.retention_ms),
        }
        if min_insync_replicas:
            config["min.insync.replicas"] = str(min_insync_replicas)
        return config


UPLOADS = TopicSpec("ragstream.uploads", UploadEvent,
                    "upload and delete requests (claim checks to raw objects)", retention_ms=-1)
PARTITION_TASKS = TopicSpec("ragstream.partition-tasks", PartitionTask,
                            "normalized files (whole documents) to partition")
# a lane of their own, read by a second agent of the partition stage with its own
# concurrency: a whole small document never queues behind a long PDF's ranges, nor
# behind another project's bulk upload (its whole documents come here too)
PAGE_RANGES = TopicSpec("ragstream.page-ranges", PartitionTask,
                        "page ranges (parts) of split documents, and whole documents of a "
                        "project's burst (the bulk lane, topics/lanes.py), to partition")
ELEMENTS = TopicSpec("ragstream.elements", ElementsReady,
                     "partitioned elements stored as JSON in object storage")
CHUNKS = TopicSpec("ragstream.chunks", Chunk, "one event per chunk (chunk_by_title, sized to the embedder's word-piece limit)")
# kept forever: ``ragstream reindex`` replays them into a new collection (streams/reindex.py)
ENHANCED = TopicSpec("ragstream.enhanced-chunks", Chunk, "chunks with their text to embed", retention_ms=-1)
EMBEDDINGS = TopicSpec("ragstream.embeddings", EmbeddedChunk, "chunks with their embedding", retention_ms=-1)
STATUS = TopicSpec("ragstream.status", StatusEvent,
                   "status changelog, key: document id", retention_ms=-1, compacted=True)
DEAD_LETTERS = TopicSpec("ragstream.dead-letters", DeadLetter,
                         "events that failed permanently, with their error", retention_ms=30 * DAY_MS)

ALL: tuple[TopicSpec, ...] = (
    UPLOADS, PARTITION_TASKS, PAGE_RANGES, ELEMENTS, CHUNKS, ENHANCED, EMBEDDINGS, STATUS,
    DEAD_LETTERS,
)

# Which topic each stage consumes and produces: the topology in one place.
STAGE_TOPICS: dict[str, tuple[TopicSpec, Optional[TopicSpec]]] = {
    "normalize": (UPLOADS, PARTITION_TASKS),
    "partition": (PARTITION_TASKS, ELEMENTS),
    "chunk": (ELEMENTS, CHUNKS),
    "enhance": (CHUNKS, ENHANCED),
    "embed": (ENHANCED, EMBEDDINGS),
    "index": (EMBEDDINGS, None),
    "projection": (STATUS, None),
    "notify": (STATUS, None),
}

# Topics a stage reads besides its STAGE_TOPICS source (same consumer group, an agent
# each): the partition stage's page ranges, a lane apart from whole documents.
MORE_SOURCES: dict[str, tuple[TopicSpec, ...]] = {"partition": (PAGE_RANGES,)}


def stage_sources(stage: str) -> tuple[TopicSpec, ...]:
    """Every topic ``stage`` consumes: its STAGE_TOPICS source first, then MORE_SOURCES.
    Raises KeyError for a stage not in STAGE_TOPICS."""
    return (STAGE_TOPICS[stage][0],) + MORE_SOURCES.get(stage, ())
