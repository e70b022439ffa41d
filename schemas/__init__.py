"""Event records that flow between ragstream stages: the one place a message is defined."""
from schemas.chunk import Chunk, EmbeddedChunk, chunk_id
from schemas.dead_letter import DeadLetter, undecodable_dead_letter
from schemas.decode import SUPPORTED_SCHEMA_VERSION, UndecodableRecord, decode_event
from schemas.status import TERMINAL, DocumentStatus, StatusEvent, sequence, status_event
from schemas.upload import DELETE, UPLOAD, UploadEvent
from schemas.work import ElementsReady, PartitionTask

__all__ = [
    "Chunk", "EmbeddedChunk", "chunk_id", "DeadLetter", "DocumentStatus", "StatusEvent",
    "TERMINAL", "sequence", "status_event", "UploadEvent", "UPLOAD", "DELETE",
    "ElementsReady", "PartitionTask", "decode_event", "UndecodableRecord",
    "SUPPORTED_SCHEMA_VERSION", "undecodable_dead_letter",
]
