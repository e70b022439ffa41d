"""One pass of ``ragstream sync``: make a project's documents match a source (a local
folder or an S3 prefix, adapters/source_listing.py).

A sync is a producer like ``ragstream ingest`` and the API: new and changed objects
go through :func:`streams.ingest.ingest_file`, objects that left the source through
:func:`streams.ingest.delete_document`.  What the source produced is recorded in
PostgreSQL (``source_objects``, revision 0008): per ``(project, source id, path)``
the document, its version, the pre-check of the bytes last seen (size, mtime, ETag)
and their sha256.

Per listed object, in pages (never the whole listing in memory):

- refused by the listing (a symlink out of a folder, a ``..`` key...): failed, with
  its reason; a row it had is kept (an unreadable object is not a deletion);
- same size, mtime and ETag as its row: unchanged, nothing read;
- else read (copied to a temporary file while hashed): the same sha256 as its row →
  unchanged (the row takes the new size/mtime/ETag); else ingested → ``added`` (no
  row) or ``changed``.  The version registry dedups on the sha256, so an object
  ingested by a pass that was killed before writing its row queues nothing again;
- its document deleted since it was synced (``ragstream delete``, a project
  delete): ingested again (a new version), counted ``added``;
- a path new to this source first claims its document id (a row of version
  ``CLAIMED``), then is ingested, then its row takes the version: two sources racing
  for one id never both ingest, and a pass killed between the ingest and the row
  finds its own claim next time;
- a changed object's bytes are claimed the same way (``claimed_sha256``, revision
  0009) before they are uploaded: the document's latest version holding them is the
  sync's own, not "changed outside this sync", when the pass died before its row.

After a complete listing, every row the pass did not see is deleted: the document
gets a delete request, then the row goes (a pass killed between the two sends the
request again next time unless the document is DELETED already).  A listing that
fails part-way deletes nothing.  Only rows of this source are ever deleted: a
document uploaded by hand, or produced by another source, is not in them; a path
whose document id another source of the project produced is refused (failed).
One pass per (project, source) at a time (a PostgreSQL advisory lock): a second
raises SyncBusy.
"""
from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

import asyncpg

from adapters.collection_names import check_project
from adapters.metadata import Metadata
from adapters.object_keys import check_category
from adapters.object_store import ObjectStore
from adapters.source_listing import FetchedObject, ObjectUnreadable, SourceObject
from streams.document_ids import default_document_id, local_id
from streams.ingest import DocumentNotFound, delete_document, ingest_file

BATCH = 500  # objects per page of the listing (and per round trip for their rows)

ROWS_SQL = """
SELECT s.*, coalesce(x.up_to_version, 0) >= s.version AS gone,
       (SELECT v.sha256 FROM document_versions v WHERE v.document_id = s.document_id
        ORDER BY v.version DESC LIMIT 1) AS latest_sha256
FROM source_objects s LEFT JOIN document_deletions x ON x.document_id = s.document_id
WHERE s.project = $1 AND s.source_id = $2 AND s.path = ANY($3::text[])
"""
#: a document's latest registered version, its bytes, and whether a delete covers it
LATEST_SQL = """
SELECT v.version, v.sha256, coalesce(x.up_to_version, 0) >= v.version AS gone
FROM document_versions v LEFT JOIN document_deletions x ON x.document_id = v.document_id
WHERE v.document_id = $1 ORDER BY v.version DESC LIMIT 1
"""
FOREIGN = ("was changed outside this sync (its latest version holds other bytes, uploaded by "
           "hand or through the API): the sync leaves it alone")
UPSERT_SQL = """
INSERT INTO source_objects (project, source_id, path, document_id, version, etag, size, mtime_ns,
                            sha256, seen_pass)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (project, source_id, path) DO UPDATE SET
    document_id = EXCLUDED.document_id, version = EXCLUDED.version, etag = EXCLUDED.etag,
    size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns, sha256 = EXCLUDED.sha256,
    seen_pass = EXCLUDED.seen_pass, claimed_sha256 = NULL, synced_at = now()
"""
#: a changed object's bytes, set before they are uploaded (revision 0009)
CLAIM_CHANGE_SQL = ("UPDATE source_objects SET claimed_sha256 = $4"
                    " WHERE project = $1 AND source_id = $2 AND path = $3")
SEEN_SQL = ("UPDATE source_objects SET seen_pass = $4"
            " WHERE project = $1 AND source_id = $2 AND path = ANY($3::text[])")
KEEP_UNDER_SQL = ("UPDATE source_objects SET seen_pass = $4"
                  " WHERE project = $1 AND source_id = $2 AND starts_with(path, $3)")
OWNER_SQL = ("SELECT source_id FROM source_objects"
             " WHERE project = $1 AND document_id = $2 AND source_id <> $3")
UNSEEN_SQL = ("SELECT path, document_id, sha256, claimed_sha256 FROM source_objects"
              " WHERE project = $1 AND source_id = $2 AND seen_pass <> $3 ORDER BY path LIMIT $4")
FORGET_SQL = ("DELETE FROM source_objects"
              " WHERE project = $1 AND source_id = $2 AND path = $3 AND seen_pass <> $4")


#: the version of a row written before its object is ingested: the path claims its
#: document id first, so two sources racing for one id never both ingest (the unique
#: (project, document_id) refuses the second), and a pass killed between the ingest
#: and its row finds its own claim next time (same sha256 as the latest version) and
#: takes the document over instead of calling it foreign.  A delete of version 0 or
#: above covers it, so ROWS_SQL calls such a row ``gone`` and the object is read again.
CLAIMED = 0


class SyncBusy(RuntimeError):
    """Another pass over the same source into the same project is running."""


class Source(Protocol):
    """What a pass needs of a source (adapters.source_listing.FolderSource, S3Source)."""

    source_id: str

    def batches(self, size: int):
        """Async iterator of lists of SourceObject."""

    async def fetch(self, obj: SourceObject, dest: Path) -> FetchedObject:
        """Copy one object to ``dest``, hashing it."""


#: ``notify(kind, path, detail)``: kind is added, changed, deleted or failed; detail
#: the scoped document id and version (``P.doc-… v2``), or a failure's reason
Notify = Callable[[str, str, str], None]


FAILURES_KEPT = 1000  # (path, reason) pairs a report keeps; every failure is counted and notified


@dataclass
class SyncReport:
    """Counts of one pass, its first :data:`FAILURES_KEPT` failures (path, reason),
    and, when the pass was asked to track them, the document versions it queued
    (scoped id → version: uploads and deletes, for ``--wait``)."""

    added: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: int = 0
    read: int = 0  # objects whose bytes were read (the pre-check did not settle them)
    failures: list[tuple[str, str]] = field(default_factory=list)
    queued: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """``sync added=… changed=… deleted=… unchanged=…`` (`` failed=…`` if any)."""
        out = (f"sync added={self.added} changed={self.changed} deleted={self.deleted} "
               f"unchanged={self.unchanged}")
        return out + (f" failed={self.failed}" if self.failed else "")


class _Pass:
    """The state of one pass (module docstring)."""

    def __init__(self, source: Source, project: str, category: str, store: ObjectStore,
                 metadata: Metadata, producer, notify: Notify, track: bool):
        self.source, self.project, self.category = source, project, category
        self.store, self.metadata, self.producer = store, metadata, producer
        self.notify = notify
        self.pool = metadata.pool
        self.pass_id = uuid.uuid4().hex
        self.report = SyncReport()
        self.track = track

    def fail(self, path: str, reason: str) -> None:
        self.report.failed += 1
        if len(self.report.failures) < FAILURES_KEPT:
            self.report.failures.append((path, reason))
        self.notify("failed", path, reason)

    def queued(self, document_id: str, version: int) -> None:
        if self.track:
            self.report.queued[document_id] = version

    async def batch(self, objs: list[SourceObject]) -> None:
        key = (self.project, self.source.source_id)
        rows = {r["path"]: r for r in await self.pool.fetch(
            ROWS_SQL, *key, [o.path for o in objs if not o.folder])}
        seen: list[str] = []
        for obj in objs:
            row = rows.get(obj.path)
            if obj.problem:
                self.fail(obj.path + ("/" if obj.folder and obj.path else ""), obj.problem)
                if obj.folder:  # nothing below it was listed: keep all of it
                    await self.pool.execute(KEEP_UNDER_SQL, *key, obj.path + "/" if obj.path else "",
                                            self.pass_id)
                elif row is not None:
                    seen.append(obj.path)
            elif row is not None and not row["gone"] and \
                    row["latest_sha256"] not in (row["sha256"], row["claimed_sha256"]):
                self.fail(obj.path, f"its document {row['document_id']} {FOREIGN}")
                seen.append(obj.path)
            elif row is not None and not row["gone"] and row["claimed_sha256"] is None and \
                    (row["size"], row["mtime_ns"], row["etag"]) == (obj.size, obj.mtime_ns, obj.etag):
                self.report.unchanged += 1
                seen.append(obj.path)
            elif not await self.read(obj, row) and row is not None:
                seen.append(obj.path)  # unreadable now: kept, not deleted
        if seen:
            await self.pool.execute(SEEN_SQL, *key, seen, self.pass_id)

    async def read(self, obj: SourceObject, row: Optional[Any]) -> bool:
        """Read, compare and ingest one object; False when it could not be read."""
        live = row is not None and not row["gone"]
        with tempfile.TemporaryDirectory(prefix="ragstream-sync-") as tmp:
            staged = Path(tmp) / "object"
            try:
                got = await self.source.fetch(obj, staged)
            except ObjectUnreadable as exc:
                self.fail(obj.path, str(exc))
                return False
            self.report.read += 1
            if live and got.sha256 == row["sha256"] and row["claimed_sha256"] is None:  # touched, not changed
                self.report.unchanged += 1
                await self.record(obj, row["document_id"], row["version"], got)
                return True
            document_id = default_document_id(obj.path)
            owner = await self.pool.fetchval(OWNER_SQL, self.project, f"{self.project}.{document_id}",
                                             self.source.source_id)
            if owner is not None:
                self.fail(obj.path, f"its document {document_id} was produced by the source {owner}; "
                                    "sync one common parent instead")
                return False
            if not live:  # a path new to this source: its id must not be a live document already
                latest = await self.pool.fetchrow(LATEST_SQL, f"{self.project}.{document_id}")
                claimed = row is not None and row["version"] == CLAIMED and latest is not None \
                    and latest["sha256"] == row["sha256"]  # a killed pass's own upload
                if latest is not None and not latest["gone"] and not claimed:
                    self.fail(obj.path, f"a document {document_id} exists that this sync did not produce "
                                        "(ingested by hand or through the API): delete it first to sync it")
                    return False
                try:
                    await self.record(obj, f"{self.project}.{document_id}", CLAIMED, got)
                except asyncpg.UniqueViolationError:  # another source claimed the id meanwhile
                    self.fail(obj.path, f"its document {document_id} was produced by another source")
                    return False
            if live:  # a changed object: its bytes are claimed first (CLAIM_CHANGE_SQL)
                await self.pool.execute(CLAIM_CHANGE_SQL, self.project, self.source.source_id, obj.path,
                                        got.sha256)
            result = await ingest_file(staged, project=self.project, category=self.category,
                                       store=self.store, metadata=self.metadata,
                                       producer=self.producer, document_id=document_id,
                                       filename=obj.name, sha256=got.sha256)
        try:
            await self.record(obj, result.document_id, result.version, got)
        except asyncpg.UniqueViolationError:  # another source claimed the id meanwhile
            self.fail(obj.path, f"its document {document_id} was produced by another source")
            return False
        kind = "changed" if live else "added"
        setattr(self.report, kind, getattr(self.report, kind) + 1)
        if result.queued:
            self.queued(result.document_id, result.version)
        self.notify(kind, obj.path, f"{result.document_id} v{result.version}")
        return True

    async def record(self, obj: SourceObject, document_id: str, version: int,
                     got: FetchedObject) -> None:
        """The row of ``obj``: the pre-check as listed (a listing is compared with the
        last listing: S3's GET gives mtime in whole seconds, its listing finer; an
        object changed between listing and read differs next time and is read
        again), the sha256 of the bytes read."""
        await self.pool.execute(UPSERT_SQL, self.project, self.source.source_id, obj.path,
                                document_id, version, obj.etag, obj.size, obj.mtime_ns,
                                got.sha256, self.pass_id)

    async def delete_unseen(self) -> None:
        key = (self.project, self.source.source_id)
        while rows := await self.pool.fetch(UNSEEN_SQL, *key, self.pass_id, BATCH):
            for r in rows:
                latest = await self.pool.fetchrow(LATEST_SQL, r["document_id"])
                if latest is not None and not latest["gone"] and \
                        latest["sha256"] not in (r["sha256"], r["claimed_sha256"]):
                    await self.pool.execute(FORGET_SQL, *key, r["path"], self.pass_id)
                    self.fail(r["path"], f"left the source, but its document {r['document_id']} {FOREIGN}")
                    continue
                try:
                    res = await delete_document(project=self.project,
                                                document_id=local_id(self.project, r["document_id"]),
                                                bucket=self.store.bucket, producer=self.producer,
                                                metadata=self.metadata)
                    if res.queued:
                        self.queued(res.document_id, res.version)
                    detail = f"{res.document_id} v{res.version}"
                except DocumentNotFound:  # never registered (a row of another database?)
                    detail = f"{r['document_id']} (unknown)"
                await self.pool.execute(FORGET_SQL, *key, r["path"], self.pass_id)
                self.report.deleted += 1
                self.notify("deleted", r["path"], detail)


def _lock_key(project: str, source_id: str) -> str:
    return f"ragstream-sync:{project}:{source_id}"


async def sync_pass(source: Source, *, project: str, category: str, store: ObjectStore,
                    metadata: Metadata, producer, notify: Optional[Notify] = None,
                    batch: int = BATCH, track: bool = False) -> SyncReport:
    """One pass of ``source`` into ``project`` (module docstring); returns its
    counts.  ``notify(kind, path, detail)`` is called for each object added,
    changed, deleted or failed (not for unchanged ones); ``track``: keep the
    versions queued in ``report.queued`` (one entry per document: for following
    them).  ``batch``: objects per listing page.  Raises InvalidProjectName,
    ValueError for a bad category, SyncBusy, adapters.source_listing.InvalidSource
    when the listing fails (then nothing is deleted), and the broker's, S3's and
    PostgreSQL's errors (the pass stops; running it again resumes)."""
    check_project(project)
    check_category(category)
    work = _Pass(source, project, category, store, metadata, producer,
                 notify or (lambda kind, path, detail: None), track)
    async with metadata.pool.acquire() as conn:
        lock = _lock_key(project, source.source_id)
        if not await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", lock):
            raise SyncBusy(f"another sync of {source.source_id} into {project} is running")
        try:
            async for objs in source.batches(batch):
                await work.batch(objs)
            await work.delete_unseen()
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", lock)
    return work.report
