"""Messages between the document-level stages (normalize → partition → chunk).

Both carry object-storage references (claim check): the normalized file, and the
partitioned elements as JSON.
"""
from __future__ import annotations

from typing import Optional

import faust

from schemas import codec


class DocumentRef(faust.Record, abstract=True, serializer=codec.CODEC_NAME):
    """Identity of one document version, shared by every document-level message."""

    document_id: str
    version: int
    project: str
    category: str
    filename: str
    bucket: str
    callback_url: Optional[str]


class PartitionTask(DocumentRef, serializer=codec.CODEC_NAME):
    """normalize → partition: partition the object at ``key`` as ``filetype``.

    ``page_start``/``page_end`` (1-based, inclusive) select a page range when a large
    PDF is split, or a range of units (DOCX blocks, PPTX slides, XLSX sheets, HTML
    blocks, text paragraphs: ``stages.document_parts``) of another long document;
    ``part``/``parts`` number the ranges (0-based / count).
    """

    key: str
    filetype: str
    page_count: int = 0
    page_start: int = 0
    page_end: int = 0
    part: int = 0
    parts: int = 1
    bulk: bool = False  # in a project's burst: the bulk lane of every topic (topics/lanes.py)
    sealed: Optional[str] = None  # content fields sealed with the version's data key (schemas/sealing.py)
    schema_version: int = 1


class ElementsReady(DocumentRef, serializer=codec.CODEC_NAME):
    """partition → chunk: element dicts (unstructured ``to_dict``) stored at ``elements_key``.

    ``worker`` (``host:pid``) names the partition process that produced them.
    """

    elements_key: str
    element_count: int
    page_count: int = 0
    part: int = 0
    parts: int = 1
    worker: str = ""
    bulk: bool = False  # in a project's burst: the bulk lane of every topic (topics/lanes.py)
    sealed: Optional[str] = None  # content fields sealed with the version's data key (schemas/sealing.py)
    schema_version: int = 1
