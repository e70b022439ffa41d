"""Deterministic object-storage keys: the same document version always maps to the
same keys, so a redelivered or replayed event overwrites instead of duplicating."""
from __future__ import annotations


def raw_key(project: str, category: str, version: int, document_id: str, ext: str) -> str:
    """``raw/{project}/{category}/v{version}/{document_id}.{ext}``."""
    suffix = f".{ext}" if ext else ""
    return f"raw/{project}/{category}/v{version}/{document_id}{suffix}"


def processed_key(project: str, document_id: str, version: int) -> str:
    """``processed/{project}/{document_id}/v{version}.json``: the chunks as JSON."""
    return f"processed/{project}/{document_id}/v{version}.json"


def work_prefix(project: str, document_id: str, version: int) -> str:
    """Prefix of a version's intermediate objects (normalized file, elements)."""
    return f"work/{project}/{document_id}/v{version}/"


def normalized_key(project: str, document_id: str, version: int, ext: str) -> str:
    """Where normalize puts a converted file (e.g. DOCX → PDF)."""
    return f"{work_prefix(project, document_id, version)}normalized.{ext}"


def elements_key(project: str, document_id: str, version: int, part: int) -> str:
    """Where partition puts the element dicts of one part (page range) as JSON."""
    return f"{work_prefix(project, document_id, version)}elements-{part:04d}.json"


def document_prefix(area: str, project: str, document_id: str) -> str:
    """``{area}/{project}/{document_id}/``: every version of a document in one area
    (``processed`` or ``work``)."""
    return f"{area}/{project}/{document_id}/"
