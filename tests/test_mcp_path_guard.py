"""mcp_server/path_guard.py on real files: only regular files inside the root are
opened, whatever symlinks, ``..``, FIFOs or sizes a caller tries (no stack needed)."""
from __future__ import annotations

import os

import pytest

from mcp_server.path_guard import PathRefused, SizedReader, open_under_root, upload_root


@pytest.fixture
def tree(tmp_path):
    """``root/`` with ``doc.txt``, ``sub/inner.txt``, a FIFO, links in and out; and
    ``outside/secret.txt`` beside it (the root is given through a symlink too)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "doc.txt").write_bytes(b"0123456789")
    (root / "sub" / "inner.txt").write_bytes(b"inner")
    (outside / "secret.txt").write_bytes(b"secret")
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    (root / "outdir").symlink_to(outside)
    (root / "alias.txt").symlink_to(root / "sub" / "inner.txt")
    os.mkfifo(root / "fifo")
    (tmp_path / "root-link").symlink_to(root)
    return root, outside


def _read(root, requested, max_bytes=1 << 20) -> tuple[str, bytes]:
    opened = open_under_root(upload_root(root), requested, max_bytes)
    with opened.reader:
        return opened.name, opened.reader.read()


def test_files_inside_the_root_are_opened(tree):
    root, _ = tree
    assert _read(root, "doc.txt") == ("doc.txt", b"0123456789")
    assert _read(root, str(root / "sub" / "inner.txt")) == ("inner.txt", b"inner")
    assert _read(root, "sub/../doc.txt") == ("doc.txt", b"0123456789")
    # a symlink whose target is inside the root: the name asked for, the target's bytes
    assert _read(root, "alias.txt") == ("alias.txt", b"inner")
    # the root itself given through a symlink: resolved once, files under it allowed
    assert _read(root.parent / "root-link", "doc.txt")[1] == b"0123456789"


@pytest.mark.parametrize("requested", [
    "../outside/secret.txt", "sub/../../outside/secret.txt", "escape.txt", "outdir/secret.txt",
    "/etc/passwd", "/", "..", "../outside/does-not-exist",
])
def test_paths_resolving_outside_the_root_are_refused(tree, requested):
    root, _ = tree
    with pytest.raises(PathRefused, match="outside the upload root"):
        open_under_root(upload_root(root), requested, 1 << 20)


@pytest.mark.parametrize("requested, reason", [
    ("fifo", "not a regular file"),  # opened non-blocking: no writer needed to get here
    ("sub", "not a regular file"),
    (".", "not a regular file"),
    ("missing.txt", "No such file"),
    ("", "empty"),
    ("doc\x00.txt", "without NUL"),
    ("a" * 5000, "at most 4096"),
])
def test_what_is_not_a_readable_file_is_refused(tree, requested, reason):
    root, _ = tree
    with pytest.raises(PathRefused, match=reason):
        open_under_root(upload_root(root), requested, 1 << 20)


def test_no_root_refuses_every_path(tree):
    root, _ = tree
    assert upload_root(None) is None
    with pytest.raises(PathRefused, match="without --root"):
        open_under_root(None, str(root / "doc.txt"), 1 << 20)
    with pytest.raises(PathRefused, match="not a directory"):
        upload_root(root / "doc.txt")
    with pytest.raises(PathRefused, match="No such file"):
        upload_root(root / "nope")


def test_size_cap_and_a_file_that_changes_while_read(tree):
    root, _ = tree
    assert _read(root, "doc.txt", max_bytes=10)[1] == b"0123456789"
    with pytest.raises(PathRefused, match="10 bytes, over the upload limit of 9 bytes"):
        open_under_root(upload_root(root), "doc.txt", 9)
    opened = open_under_root(upload_root(root), "doc.txt", 10)
    with opened.reader:
        (root / "doc.txt").write_bytes(b"0123456789" * 3)  # grew: only the 10 bytes checked go
        assert opened.reader.seek(0, os.SEEK_END) == 10 and opened.reader.tell() == 10
        opened.reader.seek(0)
        assert opened.reader.read(4) + opened.reader.read() == b"0123456789"
        assert opened.reader.read() == b""
    opened = open_under_root(upload_root(root), "doc.txt", 100)
    with opened.reader:
        assert opened.size == 30
        (root / "doc.txt").write_bytes(b"short")  # shrank: refused, not sent short
        with pytest.raises(PathRefused, match="got shorter"):
            opened.reader.read()


def test_sized_reader_is_what_httpx_measures(tree):
    """httpx learns a body's length from seek/tell (no fileno): the reader's size."""
    from httpx._utils import peek_filelike_length

    root, _ = tree
    opened = open_under_root(upload_root(root), "doc.txt", 100)
    with opened.reader:
        assert isinstance(opened.reader, SizedReader)
        assert peek_filelike_length(opened.reader) == 10 and opened.reader.tell() == 0


def test_the_relative_path_names_the_document_as_ingest_does(tree):
    """``sub/inner.txt`` and ``inner.txt`` would be two documents under ``ingest ROOT``;
    the upload carries the path under the root (symlinks resolved), not only the name
    (a newcomer's finding, 2026-12-05: sub/report.txt replaced report.txt)."""
    root, _ = tree
    for requested, relative in (("sub/inner.txt", "sub/inner.txt"), ("doc.txt", "doc.txt"),
                                ("sub/../doc.txt", "doc.txt"), ("alias.txt", "sub/inner.txt")):
        opened = open_under_root(upload_root(root), requested, 1 << 20)
        with opened.reader:
            assert opened.relative == relative, requested


def test_a_hard_link_is_refused(tree):
    """A hard link in the root is the outside file under another name (a newcomer
    uploaded one); the guard cannot tell where its other names are, so it refuses."""
    root, outside = tree
    os.link(outside / "secret.txt", root / "linked.txt")
    with pytest.raises(PathRefused, match="hard link"):
        open_under_root(upload_root(root), "linked.txt", 1 << 20)
