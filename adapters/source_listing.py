"""Sources that ``ragstream sync`` keeps in step with a project: a local folder or an
S3 prefix (``s3://bucket/prefix``, any S3-compatible store).

A source lists its objects in batches (:class:`SourceObject`: the path relative to
the source root, ``/``-separated, and the cheap pre-check: size in bytes,
modification time in nanoseconds, the S3 ETag) and copies one object to a local file
while hashing it (:class:`FetchedObject`).  Nothing is ever held whole in memory: a
listing is paged (S3: 1,000 keys a page; a folder: walked lazily) and bytes are
streamed in 8 MiB blocks.

Hostile input is refused per object (``SourceObject.problem``: the reason), never
followed: a symlink whose target leaves the folder, a dangling symlink, anything
that is not a regular file (a FIFO would block a reader), a name that is not UTF-8,
an S3 key with an empty, ``.`` or ``..`` segment (a filer may normalise it into
another key: SeaweedFS stores ``a//b`` as ``a/b``).  Dot-files and dot-folders are skipped, as ``ragstream ingest DIR``
skips them.  Keys ending in ``/`` (folder markers) are not objects.
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import re
import stat
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import AsyncIterator, Iterator, Optional, Union

from botocore.exceptions import BotoCoreError, ClientError

from adapters.object_store import CHUNK_BYTES, ObjectStore
from streams.settings import Settings

BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
S3_PAGE = 1000  # keys per ListObjectsV2 page (the API's maximum)


class InvalidSource(ValueError):
    """A source that cannot be synced: not a folder, a malformed ``s3://`` URI, a
    bucket that does not answer."""


class ObjectUnreadable(Exception):
    """One object could not be read (its reason is the message); the pass goes on."""


@dataclass(frozen=True)
class SourceObject:
    """One listed object: ``path`` relative to the source root (``/``-separated),
    ``size`` (bytes), ``mtime_ns`` (ns since the epoch), ``etag`` (S3 only, without
    quotes) and ``problem``: why it is refused (None for a readable object).
    ``folder``: the entry is a folder that was not listed (``problem`` says why):
    every object synced earlier below ``path`` is kept, not deleted."""

    path: str
    size: int = 0
    mtime_ns: int = 0
    etag: Optional[str] = None
    problem: Optional[str] = None
    folder: bool = False

    @property
    def name(self) -> str:
        """The last segment of the path (the file name a document keeps)."""
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class FetchedObject:
    """An object as copied: hex ``sha256`` of the bytes written, ``size`` (bytes),
    ``mtime_ns`` and ``etag`` as the read saw them."""

    sha256: str
    size: int
    mtime_ns: int
    etag: Optional[str] = None


def _hidden(parts: list[str]) -> bool:
    return any(p.startswith(".") for p in parts)


class FolderSource:
    """A local folder: every regular file below it (``os.walk``, symlinked folders
    not entered; a symlinked file read only when its target is inside the folder)."""

    def __init__(self, folder: Path):
        try:
            self.root = Path(folder).resolve(strict=True)
        except OSError as exc:
            raise InvalidSource(f"{folder}: {exc.strerror or exc}") from None
        if not self.root.is_dir():
            raise InvalidSource(f"{folder} is not a folder")
        #: the canonical name of the source (the key of its rows in source_objects)
        self.source_id = self.root.as_uri().rstrip("/") + "/"

    def _walk(self) -> Iterator[SourceObject]:
        errors: list[OSError] = []
        for dirpath, dirnames, filenames in os.walk(self.root, onerror=errors.append):
            for exc in errors:  # a folder that cannot be listed: what it held is kept
                yield self._unlisted(exc)
            errors.clear()
            here = Path(dirpath)
            for name in sorted(dirnames):
                if not name.startswith(".") and (here / name).is_symlink() and \
                        not (here / name).resolve().is_relative_to(self.root):
                    yield SourceObject((here / name).relative_to(self.root).as_posix(), folder=True,
                                       problem="symlink leads out of the source folder; not followed")
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if not name.startswith("."):
                    full = here / name
                    yield self._describe(full, full.relative_to(self.root).as_posix())
        for exc in errors:
            yield self._unlisted(exc)

    def _unlisted(self, exc: OSError) -> SourceObject:
        rel = Path(exc.filename).relative_to(self.root).as_posix() if exc.filename else ""
        return SourceObject("" if rel == "." else rel, folder=True,
                            problem=f"cannot list the folder: {exc.strerror or exc}")

    def _describe(self, full: Path, rel: str) -> SourceObject:
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return SourceObject(shown, problem="file name is not UTF-8; not synced")
        try:
            if full.is_symlink() and not full.resolve().is_relative_to(self.root):
                return SourceObject(rel, problem="symlink leads out of the source folder; not followed")
            st = full.stat()
        except OSError as exc:
            return SourceObject(rel, problem=f"cannot stat: {exc.strerror or exc}")
        if not stat.S_ISREG(st.st_mode):
            return SourceObject(rel, problem="not a regular file")
        return SourceObject(rel, st.st_size, st.st_mtime_ns)

    async def batches(self, size: int) -> AsyncIterator[list[SourceObject]]:
        """The folder's objects, ``size`` at a time (the walk runs in a worker
        thread); a folder that cannot be listed is one entry with ``folder=True``."""
        walk = self._walk()

        def take() -> list[SourceObject]:
            return list(itertools.islice(walk, size))

        while batch := await asyncio.to_thread(take):
            yield batch

    async def fetch(self, obj: SourceObject, dest: Path) -> FetchedObject:
        """Copy the file to ``dest`` while hashing it; size and mtime are the open
        file's (``fstat``).  Raises ObjectUnreadable (gone, unreadable, replaced by
        something else than a regular file inside the folder)."""
        return await asyncio.to_thread(self._copy, obj, dest)

    def _copy(self, obj: SourceObject, dest: Path) -> FetchedObject:
        full = self.root / obj.path
        try:
            real = full.resolve(strict=True)
            if not real.is_relative_to(self.root):
                raise ObjectUnreadable("symlink leads out of the source folder; not followed")
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise ObjectUnreadable(f"cannot open: {exc.strerror or exc}") from None
        digest = hashlib.sha256()
        with os.fdopen(fd, "rb") as src:
            st = os.fstat(src.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ObjectUnreadable("not a regular file")
            try:
                with open(dest, "wb") as out:
                    while block := src.read(CHUNK_BYTES):
                        digest.update(block)
                        out.write(block)
            except OSError as exc:
                raise ObjectUnreadable(f"cannot read: {exc.strerror or exc}") from None
        return FetchedObject(digest.hexdigest(), dest.stat().st_size, st.st_mtime_ns)


def _mtime_ns(value: datetime) -> int:
    return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket[/prefix]``; the prefix ends in ``/``
    (``s3://b/docs`` is the folder ``docs/``, not ``docs2/``) or is empty (the
    whole bucket).  Raises InvalidSource for a malformed bucket or a prefix with an
    empty, ``.`` or ``..`` segment."""
    if not uri.startswith("s3://"):
        raise InvalidSource(f"not an s3:// URI: {uri!r}")
    bucket, _, prefix = uri[5:].partition("/")
    if not BUCKET_RE.fullmatch(bucket):
        raise InvalidSource(f"bucket {bucket!r} must match [a-z0-9][a-z0-9.-]{{1,61}}[a-z0-9]")
    prefix = prefix.rstrip("/")
    if prefix and any(seg in ("", ".", "..") for seg in prefix.split("/")):
        raise InvalidSource(f"prefix {prefix!r} must not have empty, '.' or '..' segments")
    return bucket, (prefix + "/" if prefix else "")


def source_settings(settings: Settings) -> Settings:
    """The settings of a sync's S3 client: ``RAGSTREAM_SYNC_S3_ENDPOINT``,
    ``_ACCESS_KEY``, ``_SECRET_KEY``, ``_REGION`` where set, else the object
    store's own ``RAGSTREAM_S3_*``."""
    return settings.model_copy(update={
        "s3_endpoint": settings.sync_s3_endpoint or settings.s3_endpoint,
        "s3_access_key": settings.sync_s3_access_key or settings.s3_access_key,
        "s3_secret_key": settings.sync_s3_secret_key or settings.s3_secret_key,
        "s3_region": settings.sync_s3_region or settings.s3_region})


def s3_object(prefix: str, item: dict) -> Optional[SourceObject]:
    """The :class:`SourceObject` of one ListObjectsV2 entry (``Key``, ``Size``,
    ``LastModified``, ``ETag``) under ``prefix``; None for a folder marker (a key
    ending in ``/``) or a dot-file; refused (``problem``) for a key with an empty,
    ``.`` or ``..`` segment or a NUL (AWS keeps such keys; SeaweedFS folds them)."""
    rel = item["Key"][len(prefix):]
    if not rel or rel.endswith("/"):
        return None
    parts = rel.split("/")
    if any(seg in ("", ".", "..") for seg in parts) or "\x00" in rel:
        return SourceObject(rel.replace("\x00", "\\x00"),
                            problem="key has an empty, '.' or '..' segment or a NUL; not synced")
    if _hidden(parts):
        return None
    return SourceObject(rel, int(item["Size"]), _mtime_ns(item["LastModified"]),
                        item.get("ETag", "").strip('"') or None)


class S3Source:
    """The objects under an S3 prefix, through an open :class:`ObjectStore` client
    (the store's endpoint and credentials: :func:`source_settings`)."""

    def __init__(self, uri: str, store: ObjectStore):
        self.bucket, self.prefix = parse_s3_uri(uri)
        self.store = store
        #: the canonical name of the source (the key of its rows in source_objects)
        self.source_id = f"s3://{self.bucket}/{self.prefix}"

    async def batches(self, size: int = S3_PAGE) -> AsyncIterator[list[SourceObject]]:
        """The prefix's objects, one ListObjectsV2 page (up to ``size`` keys) at a
        time.  Raises InvalidSource when the bucket cannot be listed."""
        paginator = self.store.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=self.prefix,
                                   PaginationConfig={"PageSize": min(size, S3_PAGE)})
        try:
            async for page in pages:
                batch = [o for o in (s3_object(self.prefix, item) for item in page.get("Contents", []))
                         if o is not None]
                if batch:
                    yield batch
        except (ClientError, BotoCoreError) as exc:
            raise InvalidSource(f"cannot list {self.source_id}: {_reason(exc)}") from None

    async def fetch(self, obj: SourceObject, dest: Path) -> FetchedObject:
        """Stream the object to ``dest`` while hashing it; size, ETag and mtime are the
        GET's.  Raises ObjectUnreadable (gone since the listing, access denied...)."""
        digest, size = hashlib.sha256(), 0
        try:
            resp = await self.store.client.get_object(Bucket=self.bucket, Key=self.prefix + obj.path)
            body = resp["Body"]
            try:
                with open(dest, "wb") as out:
                    async for block in body.iter_chunks(CHUNK_BYTES):
                        digest.update(block)
                        out.write(block)
                        size += len(block)
            finally:
                body.close()
        except (ClientError, BotoCoreError) as exc:
            raise ObjectUnreadable(f"cannot read: {_reason(exc)}") from None
        return FetchedObject(digest.hexdigest(), size, _mtime_ns(resp["LastModified"]),
                             resp.get("ETag", "").strip('"') or None)


@asynccontextmanager
async def open_source(spec: str, settings: Settings) -> AsyncIterator[Union[FolderSource, S3Source]]:
    """The source ``spec`` names: ``s3://bucket/prefix`` (a client of
    :func:`source_settings`, closed on exit; the bucket must answer) or a local
    folder.  Raises InvalidSource."""
    if not spec.startswith("s3://"):
        yield FolderSource(Path(spec))
        return
    parse_s3_uri(spec)  # malformed: refused before any client is made
    async with ObjectStore(source_settings(settings)) as store:
        source = S3Source(spec, store)
        try:
            await store.client.head_bucket(Bucket=source.bucket)
        except (ClientError, BotoCoreError) as exc:
            raise InvalidSource(f"cannot reach {source.source_id}: {_reason(exc)}") from None
        yield source


def _reason(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', '?')} {err.get('Message', '')}".strip()
    return str(exc)
