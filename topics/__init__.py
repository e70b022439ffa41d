"""The topic catalogue (names, partitions, retention, compaction) and its admin."""
from topics.catalogue import (
    ALL, CHUNKS, DEAD_LETTERS, ELEMENTS, EMBEDDINGS, ENHANCED, PARTITION_TASKS,
    STAGE_TOPICS, STATUS, UPLOADS, TopicSpec,
)

__all__ = [
    "ALL", "CHUNKS", "DEAD_LETTERS", "ELEMENTS", "EMBEDDINGS", "ENHANCED",
    "PARTITION_TASKS", "STAGE_TOPICS", "STATUS", "UPLOADS", "TopicSpec",
]
