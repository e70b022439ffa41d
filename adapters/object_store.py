"""Object storage over the S3 API (aioboto3): SeaweedFS locally, S3/MinIO in production.

One long-lived client per process, opened with ``async with ObjectStore(...)``.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import AsyncIterator, BinaryIO, Callable, Optional

import aioboto3
from botocore.config import Config
from botocore.exceptions import ClientError

from streams.settings import Settings

CHUNK_BYTES = 8 * 1024 * 1024  # multipart part size and hashing read size


class ObjectNotFound(KeyError):
    """The bucket/key does not exist."""


class ObjectStore:
    """Async S3 client bound to one endpoint and one default bucket."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.bucket = settings.bucket
        self._session = aioboto3.Session(
            aws_access_key_id=settings.s3_access_key,
            aws_secret_access_key=settings.s3_secret_key,
            region_name=settings.s3_region,
        )
        self._ctx = None
        self.client = None

    async def __aenter__(self) -> "ObjectStore":
        self._ctx = self._session.client(
            "s3", endpoint_url=self.settings.s3_endpoint,
            config=Config(retries={"max_attempts": 5, "mode": "standard"},
                          connect_timeout=5, read_timeout=60, s3={"addressing_style": "path"}),
        )
        self.client = await self._ctx.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        if self._ctx is not None:
            await self._ctx.__aexit__(*exc)
        self._ctx = self.client = None

    async def ensure_bucket(self, bucket: Optional[str] = None) -> None:
        """Create the bucket if it does not exist."""
        bucket = bucket or self.bucket
        try:
            await self.client.head_bucket(Bucket=bucket)
        except ClientError:
            await self.client.create_bucket(Bucket=bucket)

    async def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream",
                        bucket: Optional[str] = None) -> None:
        """Write ``data`` at ``key`` (overwrites)."""
        await self.client.put_object(Bucket=bucket or self.bucket, Key=key, Body=data,
                                     ContentType=content_type)

    async def put_file(self, key: str, path: Path, content_type: str = "application/octet-stream",
                       bucket: Optional[str] = None,
                       metadata: Optional[dict[str, str]] = None) -> None:
        """Upload a local file (multipart above 8 MiB, streamed, not read whole);
        ``metadata``: S3 user metadata (ASCII values)."""
        extra: dict = {"ContentType": content_type}
        if metadata:
            extra["Metadata"] = metadata
        await self.client.upload_file(str(path), bucket or self.bucket, key, ExtraArgs=extra)

    async def copy(self, src_key: str, dst_key: str, bucket: Optional[str] = None) -> None:
        """Server-side copy of ``src_key`` to ``dst_key`` in one bucket, content type
        and user metadata included (the managed copy: multipart above 8 MiB, no bytes
        through this process).  Raises ObjectNotFound when ``src_key`` is missing."""
        bucket = bucket or self.bucket
        try:
            await self.client.copy({"Bucket": bucket, "Key": src_key}, bucket, dst_key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise ObjectNotFound(f"{bucket}/{src_key}") from exc
            raise

    async def _get_object(self, key: str, bucket: Optional[str]) -> dict:
        """GetObject, with a missing key raised as ObjectNotFound."""
        try:
            return await self.client.get_object(Bucket=bucket or self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ObjectNotFound(f"s3://{bucket or self.bucket}/{key}") from exc
            raise

    async def get_bytes(self, key: str, bucket: Optional[str] = None) -> bytes:
        """Read a whole object.  Raises ObjectNotFound."""
        body = (await self._get_object(key, bucket))["Body"]
        try:
            return await body.read()
        finally:
            body.close()

    async def download(self, key: str, dest: Path, bucket: Optional[str] = None) -> Path:
        """Stream an object to ``dest`` (no whole-file buffering).  Raises ObjectNotFound."""
        body = (await self._get_object(key, bucket))["Body"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(dest, "wb") as fh:
                async for chunk in body.iter_chunks(CHUNK_BYTES):
                    fh.write(chunk)
        finally:
            body.close()
        return dest

    async def exists(self, key: str, bucket: Optional[str] = None) -> bool:
        """True when the object exists."""
        try:
            await self.client.head_object(Bucket=bucket or self.bucket, Key=key)
            return True
        except ClientError:
            return False

    async def list_keys(self, prefix: str, bucket: Optional[str] = None) -> AsyncIterator[str]:
        """Yield every key under ``prefix``."""
        paginator = self.client.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=bucket or self.bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                yield obj["Key"]

    async def delete_prefix(self, prefix: str, bucket: Optional[str] = None,
                            where: Optional[Callable[[str], bool]] = None) -> int:
        """Delete every object under ``prefix`` (only those whose key ``where``
        accepts, when given); returns how many were deleted."""
        keys = [k async for k in self.list_keys(prefix, bucket) if where is None or where(k)]
        for i in range(0, len(keys), 1000):
            await self.client.delete_objects(
                Bucket=bucket or self.bucket,
                Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})
        return len(keys)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 8 MiB blocks."""
    return sha256_stream(open(path, "rb"))


def sha256_stream(fh: BinaryIO) -> str:
    """Hex SHA-256 of a binary stream, read to the end and closed."""
    digest = hashlib.sha256()
    with fh:
        while block := fh.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()
