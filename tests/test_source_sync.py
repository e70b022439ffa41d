"""``ragstream sync`` (streams/source_sync.py) and ``ragstream delete`` on the real
embedded stack: a folder and an S3 prefix (a bucket of the test stack's SeaweedFS)
kept in step with a project — new and changed objects ingested, removed ones
deleted, unchanged bytes queue nothing — while documents the sync did not produce,
and other projects, are never touched.  The commands run as subprocesses, as a user
runs them; the checks read the status projection, the version registry and Milvus.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import ingest, run

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def _sync(source: str, project: str, *extra: str) -> tuple[str, subprocess.CompletedProcess]:
    """``ragstream sync SOURCE -p PROJECT --wait``: (its last line, the process)."""
    out = _cli("sync", source, "-p", project, "--wait", *extra)
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr[-3000:]
    return lines[-1], out


def _quiet_pass(stack, source: str, project: str):
    """One pass in this process (streams.source_sync.sync_pass, as the command runs
    it); its report says how many objects it read."""
    from adapters.source_listing import open_source
    from cli.progress import uploader
    from streams.source_sync import sync_pass

    async def go():
        async with uploader(stack) as (store, md, prod), open_source(source, stack) as src:
            return await sync_pass(src, project=project, category="default", store=store, metadata=md,
                                   producer=prod)
    return run(go())


def _doc(project: str, rel: str) -> str:
    from streams.document_ids import default_document_id, scoped_id

    return scoped_id(project, default_document_id(rel))


def _state(stack, project: str) -> dict:
    """``{"status": {doc: (status, version)}, "versions": {doc: n registered},
    "milvus": {doc: {versions with chunks}}, "rows": n source_objects rows}``."""
    from adapters import collection_aliases as ca
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore, alias_for

    async def read():
        async with Metadata(stack.pg_dsn) as md:
            status = {r["document_id"]: (r["status"], r["version"])
                      for r in await md.list_documents(project=project, limit=1000)}
            versions = {r["document_id"]: r["n"] for r in await md.pool.fetch(
                "SELECT document_id, count(*) AS n FROM document_versions WHERE project = $1"
                " GROUP BY document_id", project)}
            rows = await md.pool.fetchval("SELECT count(*) FROM source_objects WHERE project = $1", project)
        return status, versions, rows

    status, versions, rows = run(read())
    store = VectorStore(stack.milvus_uri)
    try:
        milvus: dict[str, set[int]] = {}
        indexed = ca.alias_target(store, alias_for(project)) is not None  # none before the first chunk
        for doc, version in (ca.chunk_versions(store, project, alias_for(project)) if indexed else {}).values():
            milvus.setdefault(doc, set()).add(version)
    finally:
        store.close()
    return {"status": status, "versions": versions, "milvus": milvus, "rows": rows}


def _settled(stack, project: str, expected: dict[str, tuple[str, int]], timeout_s: float = 120) -> dict:
    """:func:`_state` once the projection shows exactly ``expected`` (``{doc: (status,
    version)}``): it lags the status topic that ``--wait`` follows (or the timeout:
    the caller's assertion then shows the difference)."""
    deadline = time.time() + timeout_s
    while True:
        state = _state(stack, project)
        if state["status"] == expected or time.time() > deadline:
            return state
        time.sleep(0.5)


def _searchable(state: dict) -> dict[str, int]:
    """Documents search can show: COMPLETED in the projection, ``{doc: version}``;
    and the same documents, each with its one current version only, in Milvus."""
    completed = {d: v for d, (s, v) in state["status"].items() if s == "COMPLETED"}
    assert {d: {v} for d, v in completed.items()} == state["milvus"], (completed, state["milvus"])
    return completed


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _corpus(n: int) -> dict[str, str]:
    birds = ["heron", "egret", "bittern", "grebe", "coot", "rail", "snipe", "curlew", "godwit",
             "avocet", "stilt", "plover", "dunlin", "knot", "sanderling", "stint", "ruff",
             "whimbrel", "redshank", "greenshank"]
    return {f"{birds[i]}.md": f"# The {birds[i]}\n\nThe {birds[i]} waded in the shallow marsh "
                              f"at dawn, number {i}.\n" for i in range(n)}


def test_folder_sync_follows_the_source_and_spares_what_it_did_not_make(stack, worker, tmp_path, project):
    """Three files (two of one name in two folders) → three COMPLETED; one changed,
    one removed, one added, one untouched → ``added=1 changed=1 deleted=1
    unchanged=1`` and the searchable documents equal the source; again → all
    unchanged, also after a touch that changes no byte.  A document ingested by hand
    into the project, and a symlink to a file outside the folder, are left alone; a
    synced file that cannot be read (now a FIFO) fails and its document stays."""
    src, hand = tmp_path / "src", tmp_path / "hand"
    _write(src, "north/notes.md", "# North pond\n\nA bittern boomed in the north reed bed.\n")
    _write(src, "south/notes.md", "# South pond\n\nTwo grebes displayed on the south pond.\n")
    _write(src, "tern.md", "# Terns\n\nArctic terns fished off the shingle spit.\n")
    _write(hand, "kept.md", "# By hand\n\nA hand-ingested note on spoonbills.\n")
    assert [e.status for e in ingest([hand], project).last.values()] == ["COMPLETED"]
    hand_doc = _doc(project, "kept.md")

    last, out = _sync(str(src), project)
    assert last == "sync added=3 changed=0 deleted=0 unchanged=0", out.stdout + out.stderr[-2000:]
    assert out.returncode == 0
    expected = {_doc(project, r): ("COMPLETED", 1) for r in ("north/notes.md", "south/notes.md", "tern.md")}
    first = _settled(stack, project, {**expected, hand_doc: ("COMPLETED", 1)})
    assert first["status"] == {**expected, hand_doc: ("COMPLETED", 1)}  # two notes.md: two documents
    assert _searchable(first) == {doc: 1 for doc in first["status"]}

    _write(src, "north/notes.md", "# North pond\n\nThe bittern left; a marsh harrier quartered.\n")
    (src / "tern.md").unlink()
    _write(src, "east/avocet.md", "# Avocets\n\nAvocets swept the mud of the east scrape.\n")
    last, out = _sync(str(src), project)
    assert last == "sync added=1 changed=1 deleted=1 unchanged=1", out.stdout + out.stderr[-2000:]
    live = {_doc(project, "north/notes.md"): 2, _doc(project, "south/notes.md"): 1,
            _doc(project, "east/avocet.md"): 1, hand_doc: 1}
    gone = {_doc(project, "tern.md"): ("DELETED", 1)}
    state = _settled(stack, project, {**{d: ("COMPLETED", v) for d, v in live.items()}, **gone})
    assert _searchable(state) == live and state["status"][_doc(project, "tern.md")] == ("DELETED", 1)
    assert state["rows"] == 3

    os.utime(src / "south" / "notes.md", (time.time() + 60, time.time() + 60))  # touched, same bytes
    last, out = _sync(str(src), project)
    assert last == "sync added=0 changed=0 deleted=0 unchanged=3" and out.returncode == 0, out.stdout
    quiet = _quiet_pass(stack, str(src), project)  # the touch's new mtime was recorded
    assert (quiet.line(), quiet.read) == ("sync added=0 changed=0 deleted=0 unchanged=3", 0)

    (tmp_path / "outside.md").write_text("# Secret\n\nNot part of the source.\n")
    (src / "leak.md").symlink_to(tmp_path / "outside.md")
    (src / "east" / "avocet.md").unlink()  # a synced file that cannot be read now: kept
    os.mkfifo(src / "east" / "avocet.md")
    last, out = _sync(str(src), project)
    assert last == "sync added=0 changed=0 deleted=0 unchanged=2 failed=2", out.stdout
    assert "failed  leak.md: symlink leads out of the source folder; not followed" in out.stdout
    assert "failed  east/avocet.md: not a regular file" in out.stdout
    assert out.returncode == 1  # a failed object is an exit 1
    again = _state(stack, project)
    assert again["versions"] == state["versions"] and _searchable(again) == _searchable(state)
    assert again["rows"] == 3


def test_s3_prefix_sync(stack, worker, project):
    """The same over ``s3://bucket/prefix`` on the stack's SeaweedFS: keys outside the
    prefix (``docs2/``, the bucket's root) and folder markers are no documents, and
    a key with odd characters is one."""
    from adapters.object_store import ObjectStore

    bucket = "sync-" + uuid.uuid4().hex[:12]
    odd = "docs/a b/ünïcode %2F&=+.md"

    async def put(objects: dict[str, str], delete: tuple[str, ...] = ()) -> None:
        async with ObjectStore(stack) as s3:
            await s3.ensure_bucket(bucket)
            for key, text in objects.items():
                await s3.put_bytes(key, text.encode(), "text/markdown", bucket=bucket)
            for key in delete:
                await s3.client.delete_object(Bucket=bucket, Key=key)

    run(put({"docs/x/notes.md": "# X\n\nA kingfisher flashed along the x ditch.\n",
             "docs/y/notes.md": "# Y\n\nA water rail squealed in the y ditch.\n",
             odd: "# Odd\n\nA dipper bobbed on an oddly named stone.\n",
             "docs/sub/": "", "docs2/other.md": "# Other\n\nNot in the prefix.\n",
             "root.md": "# Root\n\nNot in the prefix either.\n"}))
    source = f"s3://{bucket}/docs"
    rels = ["x/notes.md", "y/notes.md", odd[len("docs/"):]]
    last, out = _sync(source, project)
    assert last == "sync added=3 changed=0 deleted=0 unchanged=0", out.stdout + out.stderr[-2000:]
    first = _settled(stack, project, {_doc(project, r): ("COMPLETED", 1) for r in rels})
    assert _searchable(first) == {_doc(project, r): 1 for r in rels}

    run(put({"docs/x/notes.md": "# X\n\nThe kingfisher was gone; a heron stood instead.\n",
             "docs/z.md": "# Z\n\nA little egret stalked the z scrape.\n"}, delete=(odd,)))
    last, out = _sync(source, project)
    assert last == "sync added=1 changed=1 deleted=1 unchanged=1", out.stdout + out.stderr[-2000:]
    live = {_doc(project, "x/notes.md"): 2, _doc(project, "y/notes.md"): 1, _doc(project, "z.md"): 1}
    state = _settled(stack, project, {**{d: ("COMPLETED", v) for d, v in live.items()},
                                      _doc(project, rels[2]): ("DELETED", 1)})
    assert _searchable(state) == live and state["status"][_doc(project, rels[2])] == ("DELETED", 1)
    last, out = _sync(source, project)
    assert last == "sync added=0 changed=0 deleted=0 unchanged=3", out.stdout
    assert _state(stack, project)["versions"] == state["versions"]
    quiet = _quiet_pass(stack, source, project)  # ETag, size and mtime settle it: nothing read
    assert (quiet.line(), quiet.read) == ("sync added=0 changed=0 deleted=0 unchanged=3", 0)


def test_a_killed_sync_resumes_without_doing_anything_twice(stack, worker, tmp_path, project):
    """SIGKILL after the first upload, then run again: every file ends COMPLETED with
    one version, one row each; a third run changes nothing."""
    src = tmp_path / "src"
    corpus = _corpus(20)
    for name, text in corpus.items():
        _write(src, name, text)
    proc = subprocess.Popen([sys.executable, "-m", "cli", "sync", str(src), "-p", project], cwd=ROOT,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            if line.split()[:1] == ["added"]:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    killed = _state(stack, project)
    assert 1 <= killed["rows"] < len(corpus), killed["rows"]  # it died mid-pass

    last, out = _sync(str(src), project)
    assert last == f"sync added={len(corpus) - killed['rows']} changed=0 deleted=0 unchanged={killed['rows']}", out.stdout
    # what the killed run queued is not waited for by this one: the projection is
    state = _settled(stack, project, {_doc(project, name): ("COMPLETED", 1) for name in corpus})
    assert _searchable(state) == {_doc(project, name): 1 for name in corpus}
    assert set(state["versions"].values()) == {1} and state["rows"] == len(corpus)
    last, _ = _sync(str(src), project)
    assert last == f"sync added=0 changed=0 deleted=0 unchanged={len(corpus)}"


def test_delete_command_reaches_only_its_projects_document(stack, worker, tmp_path, project):
    """``ragstream delete``: the document of PROJECT (own or scoped id) ends DELETED
    with no chunk left; the same id in another project, an id the project lacks,
    another project's id and a malformed one are exit 1 and touch nothing; a second
    delete says so and sends nothing."""
    other = project + "o"
    _write(tmp_path / "p", "kite.md", "# Kites\n\nRed kites circled over the farm.\n")
    _write(tmp_path / "o", "kite.md", "# Kites\n\nBlack kites circled over the lake.\n")
    _write(tmp_path / "o", "owl.md", "# Owls\n\nA barn owl hunted the verge.\n")
    assert {e.status for e in ingest([tmp_path / "p"], project).last.values()} == {"COMPLETED"}
    assert {e.status for e in ingest([tmp_path / "o"], other).last.values()} == {"COMPLETED"}
    kite, owl = _doc(project, "kite.md"), _doc(other, "owl.md")
    own_kite = kite.split(".", 1)[1]
    own_owl = owl.split(".", 1)[1]
    for doc in (own_owl, owl, "no-such-doc", "../etc/passwd", f"{other}.{own_kite}"):
        out = _cli("delete", doc, "-p", project)
        assert out.returncode == 1 and "no document" in out.stdout, (doc, out.stdout, out.stderr[-2000:])
    out = _cli("delete", kite, "-p", project, "--wait", "--timeout", "120")
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "delete queued" in out.stdout and "DELETED" in out.stdout
    mine = _settled(stack, project, {kite: ("DELETED", 1)})
    theirs = _settled(stack, other, {_doc(other, "kite.md"): ("COMPLETED", 1), owl: ("COMPLETED", 1)})
    assert mine["status"] == {kite: ("DELETED", 1)} and _searchable(mine) == {}
    assert _searchable(theirs) == {_doc(other, "kite.md"): 1, owl: 1}
    again = _cli("delete", own_kite, "-p", project)
    assert again.returncode == 0 and "already deleted" in again.stdout, again.stdout


def test_listings_refuse_hostile_entries(stack, tmp_path):
    """Listing only (no pipeline): a folder's symlinks out, FIFOs and dot-files; an
    S3 prefix's ``..`` keys, folder markers and dot-keys, paged 2 keys at a time."""
    from adapters.object_store import ObjectStore
    from adapters.source_listing import (FolderSource, InvalidSource, S3Source, SourceObject,
                                         parse_s3_uri, s3_object)

    root = tmp_path / "root"
    _write(root, "a/n.txt", "a")
    _write(root, ".hidden/x.txt", "h")
    _write(tmp_path, "out/secret.txt", "s")
    (root / "up.txt").symlink_to(tmp_path / "out" / "secret.txt")
    (root / "updir").symlink_to(tmp_path / "out")
    (root / "in.txt").symlink_to(root / "a" / "n.txt")
    os.mkfifo(root / "pipe")

    async def folder():
        return [o async for b in FolderSource(root).batches(2) for o in b]

    listed = {o.path: o.problem for o in run(folder())}
    assert listed == {"a/n.txt": None, "in.txt": None, "pipe": "not a regular file",
                      "up.txt": "symlink leads out of the source folder; not followed",
                      "updir": "symlink leads out of the source folder; not followed"}
    for bad in ("s3://B/x", "s3://ab", "s3://bucket/a/../b", "http://x/y"):
        with pytest.raises(InvalidSource):
            parse_s3_uri(bad)
    assert parse_s3_uri("s3://bucket/docs") == ("bucket", "docs/")

    bucket = "sync-" + uuid.uuid4().hex[:12]

    async def s3():
        async with ObjectStore(stack) as store:
            await store.ensure_bucket(bucket)
            for key in ("p/ok.md", "p/deep/ok.md", "p/.git/config", "p/dir/", "q/no.md"):
                await store.put_bytes(key, b"x", bucket=bucket)
            return [o async for b in S3Source(f"s3://{bucket}/p", store).batches(2) for o in b]

    assert {o.path: o.problem for o in run(s3())} == {"deep/ok.md": None, "ok.md": None}
    # keys SeaweedFS folds (it stores p/a//b.md as p/a/b.md) but AWS keeps, as listed
    at = datetime(2026, 12, 5, tzinfo=timezone.utc)
    for key in ("p/../etc/passwd", "p/a//b.md", "p/./x.md", "p/x/..", "p/a\x00b"):
        obj = s3_object("p/", {"Key": key, "Size": 1, "LastModified": at, "ETag": '"e"'})
        assert obj is not None and "segment" in obj.problem, key
    assert s3_object("p/", {"Key": "p/ü %2F.md", "Size": 3, "LastModified": at, "ETag": '"e"'}) == \
        SourceObject("ü %2F.md", 3, int(at.timestamp()) * 10**9, "e")


def test_watch_polls_until_sigterm_and_one_pass_at_a_time(stack, worker, tmp_path, project):
    """``--watch 1`` picks up a file added while it runs and ends with exit 0 on
    SIGTERM; while another process holds the source's lock a pass refuses to run
    (exit 1) and records nothing."""
    import queue
    import threading

    import asyncpg

    from adapters.source_listing import FolderSource

    src = tmp_path / "src"
    _write(src, "wren.md", "# Wrens\n\nA wren sang from the woodpile.\n")
    proc = subprocess.Popen([sys.executable, "-m", "cli", "sync", str(src), "-p", project, "--watch", "1"],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in proc.stdout], daemon=True).start()

    def next_pass(wanted: str) -> None:
        seen = []
        while (line := lines.get(timeout=120)) != wanted:
            seen.append(line)
            assert not line.startswith("sync ") or line.endswith("unchanged=1"), (line, seen)

    try:
        next_pass("sync added=1 changed=0 deleted=0 unchanged=0")
        _write(src, ".robin.md", "# Robins\n\nA robin followed the spade.\n")
        (src / ".robin.md").rename(src / "robin.md")  # whole, never half-written, when listed
        next_pass("sync added=1 changed=0 deleted=0 unchanged=1")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait(timeout=30)

    async def locked_pass() -> tuple[subprocess.CompletedProcess, int]:
        conn = await asyncpg.connect(stack.pg_dsn)
        try:
            key = f"ragstream-sync:{project}:{FolderSource(src).source_id}"
            await conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", key)
            _write(src, "dunnock.md", "# Dunnocks\n\nA dunnock crept under the hedge.\n")
            out = await asyncio.to_thread(_cli, "sync", str(src), "-p", project)
            return out, await conn.fetchval("SELECT count(*) FROM source_objects WHERE project = $1", project)
        finally:
            await conn.close()

    out, rows = run(locked_pass())
    assert out.returncode == 1 and "another sync of" in out.stdout and rows == 2, out.stdout + out.stderr[-2000:]


def test_a_synced_document_deleted_by_hand_keeps_no_path_and_comes_back(stack, worker, tmp_path, project):
    """Erasure covers the sync's record too: the source path (a file name by another
    name) leaves ``source_objects`` with the document; the next sync adds it again."""
    src = tmp_path / "src"
    _write(src, "zqpath-secret-plan.md", "# Plan\n\nThe herons nest by the weir.\n")
    _, out = _sync(str(src), project)
    assert out.stdout.strip().splitlines()[-1] == "sync added=1 changed=0 deleted=0 unchanged=0", out.stdout
    doc = _doc(project, "zqpath-secret-plan.md")
    _settled(stack, project, {doc: ("COMPLETED", 1)})
    out = _cli("delete", doc, "-p", project, "--wait", "--timeout", "120")
    assert out.returncode == 0 and "DELETED" in out.stdout, out.stdout + out.stderr[-2000:]
    deadline = time.time() + 60
    while _state(stack, project)["rows"] and time.time() < deadline:
        time.sleep(0.5)  # normalize erases right after it announces DELETED
    assert _state(stack, project)["rows"] == 0
    _, again = _sync(str(src), project)
    assert again.stdout.strip().splitlines()[-1] == "sync added=1 changed=0 deleted=0 unchanged=0", again.stdout


def test_a_sync_never_takes_over_or_deletes_what_it_did_not_make(stack, worker, tmp_path, project):
    """Documents ingested by hand under the ids a sync would use are refused (failed),
    never replaced; a synced document later replaced by hand is reported, not called
    unchanged, and not deleted when its object leaves the source (a newcomer's
    findings, 2026-12-05: the sync made v2 over a hand-ingested file, then deleted it)."""
    hand, src = tmp_path / "hand", tmp_path / "src"
    _write(hand, "x.txt", "Hand-made notes on egrets.\n")
    _write(hand, "y.txt", "Hand-made notes on ibises.\n")
    assert {e.status for e in ingest([hand], project).last.values()} == {"COMPLETED"}
    _write(src, "x.txt", "Synced notes on egrets, other bytes.\n")
    _write(src, "y.txt", "Hand-made notes on ibises.\n")
    _write(src, "z.txt", "Synced notes on storks.\n")
    last, out = _sync(str(src), project)
    assert last == "sync added=1 changed=0 deleted=0 unchanged=0 failed=2", out.stdout
    assert "did not produce" in out.stdout
    x, y, z = (_doc(project, n) for n in ("x.txt", "y.txt", "z.txt"))
    state = _settled(stack, project, {x: ("COMPLETED", 1), y: ("COMPLETED", 1), z: ("COMPLETED", 1)})
    assert state["versions"] == {x: 1, y: 1, z: 1}
    # z, the sync's own, is replaced by hand: reported, never "unchanged", never deleted
    (hand / "x.txt").unlink()
    (hand / "y.txt").unlink()
    _write(hand, "z.txt", "Hand-made notes on storks, newer.\n")
    assert {e.status for e in ingest([hand], project).last.values()} == {"COMPLETED"}
    last, out = _sync(str(src), project)
    assert last == "sync added=0 changed=0 deleted=0 unchanged=0 failed=3", out.stdout
    assert "changed outside this sync" in out.stdout
    (src / "z.txt").unlink()
    last, out = _sync(str(src), project)
    assert last.startswith("sync added=0 changed=0 deleted=0") and "failed=" in last, out.stdout
    state = _settled(stack, project, {x: ("COMPLETED", 1), y: ("COMPLETED", 1), z: ("COMPLETED", 2)})
    assert _searchable(state) == {x: 1, y: 1, z: 2}


def test_delete_refuses_an_ambiguous_id(stack, worker, tmp_path, project):
    """``P.x1`` names the own id ``P.x1`` or, scoped, the own id ``x1``: with both
    present, ``delete`` deletes neither (a newcomer's finding, 2026-12-05: it deleted
    the other one than the user had copied)."""
    for own_id in ("x1", f"{project}.x1"):
        path = tmp_path / own_id / "note.txt"
        _write(tmp_path / own_id, "note.txt", f"Note filed under {own_id}.\n")
        assert {e.status for e in ingest([path], project, document_id=own_id).last.values()} == {"COMPLETED"}
    out = _cli("delete", f"{project}.x1", "-p", project)
    assert out.returncode == 1 and "ambiguous" in out.stdout, out.stdout + out.stderr[-2000:]
    state = _settled(stack, project, {f"{project}.x1": ("COMPLETED", 1),
                                      f"{project}.{project}.x1": ("COMPLETED", 1)})
    assert _searchable(state) == {f"{project}.x1": 1, f"{project}.{project}.x1": 1}


def test_a_pass_killed_between_ingest_and_its_row_takes_its_document_over(stack, worker, tmp_path, project,
                                                                          monkeypatch):
    """The window a newcomer hit with SIGKILL (2 kills in 8, 2026-12-05): the object
    was ingested but its row not written; the next run said "a document exists that
    this sync did not produce" for ever and never deleted it.  Here the pass dies in
    that window on purpose (its row write raises); the next run takes the document
    over, and deletes it when its file leaves."""
    from streams import source_sync

    src = tmp_path / "src"
    _write(src, "kite.md", "# Kites\n\nA red kite circled over the quarry.\n")
    real_record = source_sync._Pass.record

    async def dies_after_ingest(self, obj, document_id, version, got):
        if version != source_sync.CLAIMED:
            raise RuntimeError("killed between the ingest and the row")
        await real_record(self, obj, document_id, version, got)

    monkeypatch.setattr(source_sync._Pass, "record", dies_after_ingest)
    with pytest.raises(RuntimeError, match="killed between"):
        _quiet_pass(stack, str(src), project)
    monkeypatch.setattr(source_sync._Pass, "record", real_record)
    kite = _doc(project, "kite.md")
    last, out = _sync(str(src), project)
    assert last == "sync added=1 changed=0 deleted=0 unchanged=0", out.stdout
    state = _settled(stack, project, {kite: ("COMPLETED", 1)})
    assert state["versions"] == {kite: 1} and state["rows"] == 1
    # the same window for a changed object (a newcomer's second find: "changed outside
    # this sync" for ever after a kill between the upload of new bytes and the row)
    _write(src, "kite.md", "# Kites\n\nTwo red kites circled over the quarry.\n")
    monkeypatch.setattr(source_sync._Pass, "record", dies_after_ingest)
    with pytest.raises(RuntimeError, match="killed between"):
        _quiet_pass(stack, str(src), project)
    monkeypatch.setattr(source_sync._Pass, "record", real_record)
    last, out = _sync(str(src), project)
    assert last == "sync added=0 changed=1 deleted=0 unchanged=0", out.stdout
    state = _settled(stack, project, {kite: ("COMPLETED", 2)})
    assert state["versions"] == {kite: 2} and _searchable(state) == {kite: 2}
    (src / "kite.md").unlink()
    last, out = _sync(str(src), project)
    assert last == "sync added=0 changed=0 deleted=1 unchanged=0", out.stdout


def test_two_sources_racing_for_one_project_never_both_ingest_a_path(stack, worker, tmp_path, project):
    """Two folders with the same 30 file names (other bytes) synced into one project at
    once: each document is produced by one source only, and its latest version holds
    that source's bytes (a newcomer's race, 2026-12-05, left documents holding the
    loser's bytes, reported "changed outside this sync" for ever)."""
    from adapters.metadata import Metadata
    from adapters.source_listing import open_source
    from cli.progress import uploader
    from streams.source_sync import sync_pass

    one, two = tmp_path / "one", tmp_path / "two"
    for i in range(30):
        _write(one, f"n{i}.txt", f"Heron count {i} from the first survey.\n")
        _write(two, f"n{i}.txt", f"Egret count {i} from the second survey.\n")

    async def one_pass(folder):
        async with uploader(stack) as (store, md, prod), open_source(str(folder), stack) as src:
            return await sync_pass(src, project=project, category="default", store=store, metadata=md,
                                   producer=prod)

    async def both():
        reports = await asyncio.gather(one_pass(one), one_pass(two))
        async with Metadata(stack.pg_dsn) as md:
            mismatched = await md.pool.fetch(
                "SELECT s.path, s.source_id FROM source_objects s WHERE s.project = $1 AND s.sha256 <>"
                " (SELECT v.sha256 FROM document_versions v WHERE v.document_id = s.document_id"
                "  ORDER BY v.version DESC LIMIT 1)", project)
            versions = await md.pool.fetchval(
                "SELECT max(n) FROM (SELECT count(*) AS n FROM document_versions WHERE project = $1"
                " GROUP BY document_id) c", project)
        return reports, mismatched, versions

    reports, mismatched, versions = run(both())
    assert mismatched == [] and versions == 1
    assert sum(r.added for r in reports) == 30 and sum(r.failed for r in reports) == 30
    for folder in (one, two):  # each source's next pass: nothing foreign, nothing to do
        last, out = _sync(str(folder), project)
        assert "changed outside" not in out.stdout and "added=0 changed=0 deleted=0" in last, out.stdout


@pytest.mark.parametrize("command", [["delete", "x"], ["search", "pumps"], ["reindex"], ["reindex", "--show"]])
def test_a_bad_project_name_is_a_one_line_error(command):
    """A newcomer's find: `search -p 'alpha" or …'` printed a traceback, `delete`
    exited 1 ("no document") instead of refusing the name."""
    out = _cli(*command, "-p", 'alpha" or project != "x')
    assert out.returncode == 2, out.stdout + out.stderr
    assert "must match [A-Za-z0-9_-]" in out.stdout + out.stderr and "Traceback" not in out.stderr
