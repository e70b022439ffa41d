"""Document ids: a project's own id outside, the project-scoped key inside.

A client names a document with an id of its project (``[A-Za-z0-9][A-Za-z0-9._-]
{0,127}``, :data:`DOC_ID_RE`), given or defaulted.  Inside the pipeline — events and
their record keys, the compacted status topic, PostgreSQL rows, object keys, Milvus
rows and chunk ids — the field ``document_id`` holds the **scoped id**
``{project}.{id}`` (:func:`scoped_id`).  A project name has no ``.``, so the first
``.`` splits the two and the mapping is injective: the same id in two projects is two
documents, and no project can name, overwrite, probe (no "in use" answer) or squat
another's document, whatever ids it guesses.  The edges (API answers, callbacks, the
CLI's tables) show the project's own id again (:func:`local_id`).

Default ids (:func:`default_document_id`) hash the file's path *relative to what was
ingested* (a directory argument: ``a/notes.txt`` and ``b/notes.txt`` are two
documents; one file: its name), so ingesting the same tree again makes new versions
of the same documents.  They are predictable, and need not be otherwise: an id only
ever resolves inside the caller's own project.
"""
from __future__ import annotations

import hashlib
import re

from adapters.collection_names import check_project

DOC_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class InvalidDocumentId(ValueError):
    """A document id outside ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``."""


def check_document_id(document_id: str) -> str:
    """``document_id`` itself when it is a valid id of a project; else InvalidDocumentId."""
    if not isinstance(document_id, str) or not DOC_ID_RE.fullmatch(document_id):
        raise InvalidDocumentId(f"document id {document_id!r} must match [A-Za-z0-9][A-Za-z0-9._-]{{0,127}}")
    return document_id


def scoped_id(project: str, document_id: str) -> str:
    """``{project}.{document_id}``, the pipeline's key of a project's document (at most
    64 + 1 + 128 = 193 characters).  Raises InvalidProjectName / InvalidDocumentId."""
    return f"{check_project(project)}.{check_document_id(document_id)}"


def local_id(project: str, scoped: str) -> str:
    """The project's own id of a scoped id (inverse of :func:`scoped_id`).  A value
    without the ``{project}.`` prefix (a row from before ids were scoped) is returned
    as it is."""
    prefix = f"{project}."
    return scoped[len(prefix):] if scoped.startswith(prefix) else scoped


def project_of(scoped: str) -> str | None:
    """The project of a scoped id (the part before the first ``.``), or None for a
    value without one (a row from before ids were scoped)."""
    project, dot, _ = scoped.partition(".")
    return project if dot else None


def default_document_id(source_path: str) -> str:
    """``doc-`` + the first 24 hex digits of sha256 of ``source_path``: the file's path
    relative to the ingested directory, ``/``-separated (or the name the client sent
    for a single file)."""
    return "doc-" + hashlib.sha256(source_path.encode("utf-8", "surrogateescape")).hexdigest()[:24]
