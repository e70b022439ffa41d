"""Upload by local path, for a caller who is hostile: only regular files under the
root directory the operator gave (``ragstream mcp --root DIR``), nothing else.

A requested path (absolute, or relative to the root) is resolved first — every
symlink followed, every ``..`` applied (``os.path.realpath``) — and refused unless the
result is inside the root, whether or not it exists, so the answer tells nothing
about files outside.  The file is then opened without following a last symlink
(``O_NOFOLLOW``) or waiting on a FIFO (``O_NONBLOCK``), and what was opened is checked
again: a regular file (no device, FIFO, socket or directory), and — on Linux, through
``/proc/self/fd`` — still inside the root, so a directory swapped for a symlink between
the resolution and the open is caught.  Files over the upload limit are refused before
a byte is read, and the upload reads exactly the size seen at the check
(:class:`SizedReader`), so a file growing meanwhile cannot push more.

No root → every path is refused (:class:`PathRefused` says how to turn it on).
"""
from __future__ import annotations

import errno
import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

MAX_PATH_CHARS = 4096  # characters of a requested path (PATH_MAX)


class PathRefused(ValueError):
    """A requested path that will not be uploaded; the message says why, for the
    caller (it names only the path as requested and the root)."""


def upload_root(directory: Optional[Path]) -> Optional[Path]:
    """The operator's ``--root`` as an absolute, symlink-free directory, or None when
    none was given.  Raises PathRefused when it is not an existing directory."""
    if directory is None:
        return None
    try:
        resolved = Path(os.path.realpath(directory, strict=True))
    except OSError as exc:
        raise PathRefused(f"--root {directory}: {exc.strerror or exc}") from None
    if not resolved.is_dir():
        raise PathRefused(f"--root {directory} is not a directory")
    return resolved


class SizedReader(io.RawIOBase):
    """Exactly ``size`` bytes of an open file, for an HTTP body of a known length.

    ``read`` stops at ``size`` (bytes past it, a file that grew, are never sent) and
    raises PathRefused when the file ends early (it shrank).  ``seek``/``tell`` let
    httpx learn the length without reading (it then sends a Content-Length)."""

    def __init__(self, raw: io.BufferedReader, size: int, name: str):
        super().__init__()
        self._raw, self.size, self.name, self._pos = raw, size, name, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move within ``[0, size]``; ``seek(0, SEEK_END)`` answers ``size``."""
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}[whence]
        self._pos = min(max(base + offset, 0), self.size)
        self._raw.seek(self._pos)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all that remain for ``n < 0``), never past ``size``."""
        want = self.size - self._pos if n is None or n < 0 else min(n, self.size - self._pos)
        if want <= 0:
            return b""
        data = self._raw.read(want)
        if len(data) < want:
            raise PathRefused(f"{self.name} got shorter while it was uploaded")
        self._pos += len(data)
        return data

    def close(self) -> None:
        self._raw.close()
        super().close()


@dataclass
class OpenedUpload:
    """A file opened for upload: its base name, size in bytes, a reader of exactly
    that many bytes (close it when done), and its path relative to the root
    (``/``-separated, symlinks resolved: what names its document)."""

    name: str
    size: int
    reader: SizedReader
    relative: str = ""


def _inside(path: str, root: Path) -> bool:
    return Path(path).is_relative_to(root)


def open_under_root(root: Optional[Path], requested: str, max_bytes: int) -> OpenedUpload:
    """Open ``requested`` for upload if it is a regular file inside ``root`` of at most
    ``max_bytes`` bytes.

    ``root`` comes from :func:`upload_root` (absolute, symlinks resolved; None: path
    uploads are off).  ``requested`` is absolute or relative to the root.  Raises
    PathRefused for: no root, an empty, over-long or NUL-bearing path, a path that
    resolves outside the root, a missing or unreadable file, anything but a regular
    file, a file over ``max_bytes``."""
    if root is None:
        raise PathRefused("upload by path is off: the MCP server was started without --root DIR "
                          "(ragstream mcp --root DIR allows the files under DIR)")
    if not isinstance(requested, str) or not requested.strip():
        raise PathRefused("path is empty")
    if "\x00" in requested or len(requested) > MAX_PATH_CHARS:
        raise PathRefused(f"path must be at most {MAX_PATH_CHARS} characters without NUL")
    resolved = os.path.realpath(root / requested)  # absolute `requested` replaces root
    if not _inside(resolved, root):
        raise PathRefused(f"{requested!r} is outside the upload root {root} (after resolving "
                          "symlinks and '..'): refused")
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component became a symlink after realpath
            raise PathRefused(f"{requested!r} is a symlink that changed while it was checked") from None
        raise PathRefused(f"{requested!r}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{requested!r} is not a regular file")
        if info.st_nlink > 1:  # its other names may be anywhere, outside the root too
            raise PathRefused(f"{requested!r} is a hard link ({info.st_nlink} names); copy the file "
                              "into the upload root instead")
        opened_at = _opened_path(fd)
        if opened_at is not None and not _inside(opened_at, root):
            raise PathRefused(f"{requested!r} moved outside the upload root while it was checked")
        if info.st_size > max_bytes:
            raise PathRefused(f"{requested!r} has {info.st_size} bytes, over the upload limit of "
                              f"{max_bytes} bytes")
        raw = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    name = Path(requested).name or Path(resolved).name  # the name asked for, not a symlink's target
    return OpenedUpload(name, info.st_size, SizedReader(raw, info.st_size, name),
                        Path(resolved).relative_to(root).as_posix())


def _opened_path(fd: int) -> Optional[str]:
    """Where the open file ``fd`` really is (Linux: ``/proc/self/fd``), or None where
    the system does not say."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
