"""Deterministic object-storage keys: the same document version always maps to the
same keys, so a redelivered or replayed event overwrites instead of duplicating.

Categories and document ids become key segments, so they are checked against
``CATEGORY_RE`` and ``DOCUMENT_ID_RE`` (the API's rules, api/documents.py) wherever
they enter: no ``/``, no ``..``, nothing empty.
"""
from __future__ import annotations

import re
from typing import Optional

CATEGORY_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_category(category: str) -> str:
    """``category`` unchanged when it matches ``[A-Za-z0-9_-]{1,64}``; else ValueError
    naming the value and the rule."""
    if not CATEGORY_RE.fullmatch(category):
        raise ValueError(f"category {category!r} must match [A-Za-z0-9_-]{{1,64}}")
    return category


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


def image_key(project: str, document_id: str, version: int, part: int, n: int, ext: str = "png") -> str:
    """Where partition keeps the ``n``-th extracted image of one part (page range):
    ``work/{project}/{document_id}/v{version}/images/{part:04d}-{n:04d}.{ext}``."""
    return f"{work_prefix(project, document_id, version)}images/{part:04d}-{n:04d}.{ext}"


def object_uri(bucket: str, key: str) -> str:
    """``s3://{bucket}/{key}``: an object reference that names its bucket."""
    return f"s3://{bucket}/{key}"


def split_uri(uri: str) -> tuple[str, str]:
    """``(bucket, key)`` of an ``s3://bucket/key`` reference.  Raises ValueError for
    anything else."""
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"not an s3://bucket/key reference: {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def document_prefix(area: str, project: str, document_id: str) -> str:
    """``{area}/{project}/{document_id}/``: every version of a document in one area
    (``processed`` or ``work``)."""
    return f"{area}/{project}/{document_id}/"


_VERSION_PART = re.compile(r"v(\d+)(?:/|\.json$)")


def key_version(key: str, prefix: str) -> Optional[int]:
    """The version a key under :func:`document_prefix` belongs to: ``n`` for
    ``{prefix}v{n}/…`` (work objects) and ``{prefix}v{n}.json`` (processed chunks);
    None for a key outside ``prefix`` or of any other shape (such a key is no
    version's, so a bounded delete leaves it alone)."""
    if not key.startswith(prefix):
        return None
    m = _VERSION_PART.match(key, len(prefix))
    return int(m.group(1)) if m else None
