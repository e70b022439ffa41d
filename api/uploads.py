"""Receiving uploads without holding whole files: multipart bodies are parsed as they
arrive and the file part is piped to object storage while it is hashed.

Memory per upload is bounded by one S3 part (``PART_BYTES``, 8 MiB) plus one
network read, whatever the file size.  The bytes go to a staging object
``staging/{project}/{uuid}`` first, because the raw key names the version and the
version depends on the hash (same bytes → no new version): once the hash is known
the staging object is copied server-side to its raw key (or dropped when
unchanged) and always deleted.  Past ``max_bytes`` the S3 multipart upload is
aborted and nothing is kept (→ 413).

Everything else in the body is bounded too, whether or not the request has a
Content-Length (a chunked one has none): at most ``FIELDS_MAX`` plain form fields
of at most ``FIELD_MAX`` bytes each and ``FIELDS_BYTES_MAX`` together, and the whole
body at most ``max_request_bytes`` (the file limit plus ``MULTIPART_OVERHEAD``: this
also ends an endless epilogue after the last boundary); past any of them → 413 with
the limit named.  Part headers are bounded by python-multipart itself (8 headers of
at most 4224 bytes per part: ``MultipartParser``'s defaults; more → 422).  A JSON body
is read through :func:`read_capped`.

The file part's name is sanitised here, once (stages.filenames.safe_filename: no
``..``, no path separators, no control or bidi characters, at most 255 bytes); the
client's name travels on as ``original_filename`` when it differs.
"""
from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import AsyncIterator, Optional

from python_multipart.multipart import MultipartParser, parse_options_header

from adapters.object_store import ObjectStore
from stages.filenames import safe_filename

PART_BYTES = 8 * 1024 * 1024  # S3 multipart part size (minimum 5 MiB except the last)
FIELD_MAX = 8192  # bytes of one plain form field
FIELDS_MAX = 16  # plain form fields per request (the API reads 4: project, category, document_id, callback_url)
FIELDS_BYTES_MAX = 16 * 1024  # bytes of all plain form fields together
MULTIPART_OVERHEAD = 1024 * 1024  # bytes of fields, headers and boundaries allowed above the file limit
DRAIN_MAX = 64 * 1024 * 1024  # bytes read and discarded after an overflow, so the 413 is seen


class UploadTooLarge(Exception):
    """The file, the request or its form fields exceed a limit (→ 413); ``limit`` is
    that limit (bytes, or fields for the field count), ``what`` names it."""

    def __init__(self, limit: int, what: str = "upload", unit: str = "bytes"):
        super().__init__(f"{what} exceeds the limit of {limit} {unit}")
        self.limit, self.what = limit, what


class BadUpload(ValueError):
    """The request body is not a usable upload (message says why; → 422)."""


@dataclass
class StagedFile:
    """A file streamed into staging: where it is, its name, type, size and hash.

    ``filename`` is the safe name (stages.filenames.safe_filename), ``original_filename``
    the name the client sent when it differs (else None)."""

    key: str
    filename: str
    content_type: str
    size: int
    sha256: str
    original_filename: Optional[str] = None


class StagingWriter:
    """Streams bytes to one S3 object: a single PUT for small files, a multipart
    upload in ``PART_BYTES`` parts otherwise.  Hashes (SHA-256) and counts as it goes."""

    def __init__(self, store: ObjectStore, key: str, max_bytes: int,
                 content_type: str = "application/octet-stream"):
        self.store, self.key, self.max_bytes, self.content_type = store, key, max_bytes, content_type
        self.size = 0
        self.digest = hashlib.sha256()
        self._buf: list[bytes] = []
        self._buffered = 0
        self._upload_id: Optional[str] = None
        self._parts: list[dict] = []
        self.peak_buffer = 0  # largest buffered bytes seen (for the memory-bound test)

    async def write(self, data: bytes) -> None:
        """Append ``data``.  Raises UploadTooLarge past ``max_bytes`` (after aborting)."""
        self.size += len(data)
        if self.size > self.max_bytes:
            await self.abort()
            raise UploadTooLarge(self.max_bytes)
        self.digest.update(data)
        self._buf.append(bytes(data))
        self._buffered += len(data)
        self.peak_buffer = max(self.peak_buffer, self._buffered)
        if self._buffered >= PART_BYTES:
            await self._flush_full_parts()

    async def _flush_full_parts(self) -> None:
        # cut the buffered chunks at exact PART_BYTES boundaries; join only one part at
        # a time so the peak is ~2 parts (the chunks and their join), never the file
        while self._buffered >= PART_BYTES:
            part, need = [], PART_BYTES
            while need:
                chunk = self._buf[0]
                if len(chunk) <= need:
                    part.append(self._buf.pop(0))
                    need -= len(chunk)
                else:
                    part.append(chunk[:need])
                    self._buf[0] = chunk[need:]
                    need = 0
            self._buffered -= PART_BYTES
            data = b"".join(part)
            part.clear()
            await self._flush_part(data)

    async def _flush_part(self, data: bytes) -> None:
        client, bucket = self.store.client, self.store.bucket
        if self._upload_id is None:
            resp = await client.create_multipart_upload(Bucket=bucket, Key=self.key,
                                                        ContentType=self.content_type)
            self._upload_id = resp["UploadId"]
        number = len(self._parts) + 1
        resp = await client.upload_part(Bucket=bucket, Key=self.key, UploadId=self._upload_id,
                                        PartNumber=number, Body=data)
        self._parts.append({"ETag": resp["ETag"], "PartNumber": number})

    async def finish(self) -> tuple[int, str]:
        """Complete the object; returns ``(size in bytes, hex sha256)``."""
        client, bucket = self.store.client, self.store.bucket
        data = b"".join(self._buf)
        self._buf, self._buffered = [], 0
        if self._upload_id is None:
            await self.store.put_bytes(self.key, data, self.content_type)
        else:
            if data:
                await self._flush_part(data)
            await client.complete_multipart_upload(
                Bucket=bucket, Key=self.key, UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts})
            self._upload_id = None
        return self.size, self.digest.hexdigest()

    async def abort(self) -> None:
        """Drop everything written so far (idempotent)."""
        self._buf, self._buffered = [], 0
        if self._upload_id is not None:
            upload_id, self._upload_id = self._upload_id, None
            try:
                await self.store.client.abort_multipart_upload(
                    Bucket=self.store.bucket, Key=self.key, UploadId=upload_id)
            except Exception:  # noqa: BLE001 — best effort; lifecycle rules clean the rest
                pass


@dataclass
class _Part:
    headers: dict[str, bytes] = field(default_factory=dict)
    name: str = ""
    filename: Optional[str] = None
    original_filename: Optional[str] = None
    content_type: str = "application/octet-stream"
    value: bytearray = field(default_factory=bytearray)
    writer: Optional[StagingWriter] = None


async def read_capped(body: AsyncIterator[bytes], limit: int, what: str = "request body") -> bytes:
    """The whole ``body`` as bytes, read chunk by chunk.  Raises UploadTooLarge as soon
    as more than ``limit`` bytes arrived (whether or not a Content-Length said so)."""
    got = bytearray()
    async for chunk in body:
        got += chunk
        if len(got) > limit:
            raise UploadTooLarge(limit, what)
    return bytes(got)


async def receive_multipart(body: AsyncIterator[bytes], content_type: str, *, store: ObjectStore,
                            staging_prefix: str, max_bytes: int,
                            max_request_bytes: Optional[int] = None,
                            ) -> tuple[dict[str, str], Optional[StagedFile], Optional[StagingWriter]]:
    """Parse a ``multipart/form-data`` body as it streams in.

    Returns ``(fields, staged file or None, writer)``: plain fields as strings and the
    one file part (field ``file``, at most ``max_bytes``) written to
    ``{staging_prefix}{uuid}``.  Limits (module docstring): ``FIELDS_MAX`` fields,
    ``FIELD_MAX`` bytes each, ``FIELDS_BYTES_MAX`` together, ``max_request_bytes`` for
    the whole body (default ``max_bytes +
    MULTIPART_OVERHEAD``).  Raises UploadTooLarge (staging already aborted, body
    drained up to ``DRAIN_MAX``) or BadUpload.  The caller deletes the staging object
    when done with it.
    """
    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise BadUpload("multipart/form-data without a boundary")
    request_max = max_bytes + MULTIPART_OVERHEAD if max_request_bytes is None else max_request_bytes
    events: list[tuple] = []
    header_field = bytearray()
    header_value = bytearray()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header_field.extend(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header_value.extend(data[start:end])

    def on_header_end() -> None:
        events.append(("header", bytes(header_field).lower().decode("latin-1"), bytes(header_value)))
        header_field.clear()
        header_value.clear()

    callbacks = {
        "on_part_begin": lambda: events.append(("begin",)),
        "on_part_data": lambda data, start, end: events.append(("data", bytes(data[start:end]))),
        "on_part_end": lambda: events.append(("end",)),
        "on_header_field": on_header_field,
        "on_header_value": on_header_value,
        "on_header_end": on_header_end,
        "on_headers_finished": lambda: events.append(("headers_done",)),
    }
    parser = MultipartParser(boundary, callbacks)
    fields: dict[str, str] = {}
    field_count = field_bytes = received = 0
    staged: Optional[StagedFile] = None
    part: Optional[_Part] = None
    file_writer: Optional[StagingWriter] = None
    iterator = body.__aiter__()

    async def handle(ev: tuple) -> None:
        nonlocal part, staged, file_writer, field_count, field_bytes
        kind = ev[0]
        if kind == "begin":
            part = _Part()
        elif kind == "header":
            part.headers[ev[1]] = ev[2]
        elif kind == "headers_done":
            disp, opts = parse_options_header(part.headers.get("content-disposition", b""))
            if disp != b"form-data" or b"name" not in opts:
                raise BadUpload("a multipart part lacks Content-Disposition: form-data; name=...")
            part.name = opts[b"name"].decode("utf-8", "replace")
            if b"filename" in opts or part.name == "file":
                if part.name != "file":
                    raise BadUpload(f"unexpected file field {part.name!r}; send the document as 'file'")
                if file_writer is not None:
                    raise BadUpload("more than one 'file' part")
                raw_name = opts.get(b"filename", b"upload").decode("utf-8", "replace")
                part.filename = safe_filename(raw_name)  # sanitised once, here at the edge
                part.original_filename = raw_name if raw_name != part.filename else None
                ctype = part.headers.get("content-type", b"application/octet-stream")
                part.content_type = ctype.decode("latin-1").split(";")[0].strip() or \
                    "application/octet-stream"
                part.writer = file_writer = StagingWriter(
                    store, f"{staging_prefix}{uuid.uuid4().hex}", max_bytes, part.content_type)
            else:
                field_count += 1
                if field_count > FIELDS_MAX:
                    raise UploadTooLarge(FIELDS_MAX, "the number of form fields", "fields")
        elif kind == "data":
            if part.writer is not None:
                await part.writer.write(ev[1])
            else:
                part.value += ev[1]
                field_bytes += len(ev[1])
                if len(part.value) > FIELD_MAX:
                    raise BadUpload(f"form field {part.name!r} is longer than {FIELD_MAX} bytes")
                if field_bytes > FIELDS_BYTES_MAX:
                    raise UploadTooLarge(FIELDS_BYTES_MAX, "the form fields together")
        elif kind == "end":
            if part.writer is not None:
                size, digest = await part.writer.finish()
                staged = StagedFile(part.writer.key, part.filename, part.content_type, size, digest,
                                    part.original_filename)
            else:
                try:
                    fields[part.name] = part.value.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise BadUpload(f"form field {part.name!r} is not UTF-8") from exc
            part = None

    async def drop_staging() -> None:
        if file_writer is not None:
            await file_writer.abort()
        if staged is not None:
            await store.client.delete_object(Bucket=store.bucket, Key=staged.key)

    try:
        async for chunk in iterator:
            received += len(chunk)
            if received > request_max:
                raise UploadTooLarge(request_max, "the request body")
            try:
                parser.write(chunk)
            except Exception as exc:  # noqa: BLE001 — python-multipart's parse errors
                raise BadUpload(f"malformed multipart body: {exc}") from exc
            pending, events[:] = list(events), []
            for ev in pending:
                await handle(ev)
        parser.finalize()
        for ev in events:
            await handle(ev)
    except UploadTooLarge:
        await drop_staging()
        drained = 0
        async for chunk in iterator:  # read the rest so the client sees the 413
            drained += len(chunk)
            if drained > DRAIN_MAX:
                break
        raise
    except BaseException:
        await drop_staging()
        raise
    if file_writer is not None and staged is None:
        await file_writer.abort()
        raise BadUpload("the 'file' part is incomplete")
    return fields, staged, file_writer


async def hash_object(store: ObjectStore, bucket: str, key: str) -> str:
    """Hex SHA-256 of an object, streamed in 8 MiB reads (never whole in memory)."""
    resp = await store.client.get_object(Bucket=bucket, Key=key)
    digest = hashlib.sha256()
    body = resp["Body"]
    try:
        async for chunk in body.iter_chunks(PART_BYTES):
            digest.update(chunk)
    finally:
        body.close()
    return digest.hexdigest()
