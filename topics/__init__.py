"""The topic catalogue (names, partitions, retention, compaction) and its admin."""
from topics.catalogue import (
    ALL, CHUNKS, DEAD_LETTERS, ELEMENTS, EMBEDDINGS, ENHANCED, PAGE_RANGES, PARTITION_TASKS,
    STAGE_TOPICS, STATUS, UPLOADS, TopicSpec, stage_sources,
)

__all__ = [
    "ALL", "CHUNKS", "DEAD_LETTERS", "ELEMENTS", "EMBEDDINGS", "ENHANCED",
    "PAGE_RANGES", "PARTITION_TASKS", "STAGE_TOPICS", "STATUS", "UPLOADS", "TopicSpec",
    "stage_sources",
]
