"""Issue 23, failures 1, 2 and 6: one project never reaches another's documents.

- Milvus names are injective and suffix-proof (adapters/collection_names.py): before,
  ``acme-corp`` and ``acme_corp`` shared a collection and ``sales_test`` was ``sales``'s
  test alias.
- Every expression sent to Milvus carries the project's term (a second wall): a row of
  another project inside a collection is neither found, counted nor deleted.
- Document ids are scoped per project (streams/document_ids.py): the same id in two
  projects is two documents, another project's id answers 404 (no 409 oracle).
- Directory ingest: ``a/notes.txt`` and ``b/notes.txt`` are two documents.
"""
from __future__ import annotations

import itertools
import os
import time
import uuid

import httpx
import pytest

from adapters import collection_aliases as ca
from adapters.collection_names import InvalidProjectName, project_of_stem, project_stem
from adapters.vector_store import DIM, VectorStore, alias_for
from streams.document_ids import InvalidDocumentId, default_document_id, local_id, scoped_id
from tests.conftest import ingest


def _names(project: str) -> set[str]:
    """Every Milvus name ragstream can give a project: aliases, their memories, versions."""
    prod, test = alias_for(project), alias_for(project, "test")
    out = {prod, test, ca.previous_alias(prod), ca.previous_alias(test)}
    out |= {ca.physical_name(project, n) for n in (1, 2, 10, 123)}
    return out


def test_project_names_map_injectively_and_no_suffix_is_another_project():
    """Every project over a small hostile alphabet (all strings up to 3 characters of
    ``a t v 1 _ -``, 258 projects): no Milvus name of one is a name of another, and the
    stem decodes back.  Failed before: acme-corp/acme_corp, sales_test, sales_v2."""
    owner: dict[str, str] = {}
    alphabet = "atv1_-"
    projects = ["acme-corp", "acme_corp", "sales", "sales_test", "sales_v2", "sales_previous",
                "sales__v2", "x" * 64, "_" * 64, "-" * 64]
    projects += ["".join(p) for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)]
    for project in projects:
        assert project_of_stem(project_stem(project)) == project
        for name in _names(project):
            assert owner.setdefault(name, project) == project, (name, owner[name], project)
            assert len(name) <= 255 and name[0].isalpha()
    assert alias_for("acme-corp") != alias_for("acme_corp")
    assert alias_for("sales", "test") != alias_for("sales_test")
    assert ca.physical_name("sales", 2) not in _names("sales_v2")


@pytest.mark.parametrize("bad", ["", "a.b", "a/b", "ä", "a b", "x" * 65, "a\n"])
def test_bad_project_names_are_refused(bad):
    with pytest.raises(InvalidProjectName):
        project_stem(bad)
    with pytest.raises(InvalidProjectName):
        scoped_id(bad, "doc-1")


def test_document_ids_are_scoped_per_project():
    """The same id in two projects is two keys; the key gives the id back; malformed
    ids (path segments, separators, over-long) are refused."""
    assert scoped_id("acme-corp", "d.1") != scoped_id("acme_corp", "d.1")
    assert scoped_id("a", "b.c") == "a.b.c"  # and "a.b" is no project: the first "." splits
    assert local_id("acme", scoped_id("acme", "x.y")) == "x.y"
    for bad in ["", "..", ".x", "a/b", "a:b", "x" * 129, "-a"]:
        with pytest.raises(InvalidDocumentId):
            scoped_id("p", bad)
    assert default_document_id("a/notes.txt") != default_document_id("b/notes.txt")


def test_same_named_files_of_two_folders_get_two_sources(tmp_path):
    """``ingest DIR``: ids from the path relative to the argument; two arguments that
    would give one path are refused naming both files (nothing ingested)."""
    from cli.progress import DuplicateSourcePath, expand_with_sources

    for sub in ("a", "b"):
        (tmp_path / "tree" / sub).mkdir(parents=True)
        (tmp_path / "tree" / sub / "notes.txt").write_text(sub)
    found, _ = expand_with_sources([tmp_path / "tree"])
    assert sorted(s for _, s in found) == ["a/notes.txt", "b/notes.txt"]
    with pytest.raises(DuplicateSourcePath, match="notes.txt"):
        expand_with_sources([tmp_path / "tree" / "a", tmp_path / "tree" / "b"])


def _row(project: str, document_id: str, text: str, vector: list[float]) -> dict:
    return {"chunk_id": f"{document_id}:1:0", "vector": vector, "document_id": document_id,
            "version": 1, "chunk_index": 0, "page_number": 1, "element_types": "NarrativeText",
            "filename": "x.txt", "project": project, "category": "default", "text": text}


@pytest.mark.integration
def test_every_milvus_expression_carries_the_project(stack):
    """A row whose ``project`` field is another project's, placed inside this
    project's collection (as a bug or a shared collection would), is not searched,
    counted, listed or deleted from this project."""
    project = "t" + uuid.uuid4().hex[:8]
    store = VectorStore(stack.milvus_uri)
    vec = [1.0] + [0.0] * (DIM - 1)
    try:
        store.upsert_sync(project, [_row(project, f"{project}.mine", "pump station energy", vec),
                                    _row("intruder", f"{project}.stray", "pump station energy", vec)])
        store.flush_sync(project)
        hits = store.hybrid_search_sync(project, vec, "pump station energy", k=10).hits
        assert [h["document_id"] for h in hits] == [f"{project}.mine"]
        assert store.count_sync(project, f"{project}.stray") == 0
        assert store.chunk_ids_sync(project, f"{project}.stray") == []
        store.delete_document_sync(project, f"{project}.stray")
        stray = store.client.query(alias_for(project), filter='project == "intruder"',
                                   output_fields=["chunk_id"], consistency_level="Strong")
        assert len(stray) == 1  # this project's delete cannot reach it
        versions = ca.chunk_versions(store, project, alias_for(project))
        assert set(versions) == {f"{project}.mine:1:0"}
    finally:
        store.close()


@pytest.mark.integration
@pytest.mark.slow
def test_two_projects_with_colliding_names_never_see_each_other(api, stack):
    """Failure 1 and 6 through the API: keys for ``X-corp`` and ``X_corp``; a
    confidential file of the first is not found by the second's search, its id answers
    404 to the second (not 409), and the second may use the same id for a document of
    its own, which leaves the first's untouched."""
    from api_helpers import create_key, upload, wait_status

    base = "t" + uuid.uuid4().hex[:8]
    a, b = f"{base}-corp", f"{base}_corp"
    key_a, key_b = create_key(a), create_key(b)
    secret = stack.data_dir / f"{base}-merger-plan.txt"
    secret.write_text("Confidential: the zebrafish merger closes on 14 March. " * 5)
    mine = stack.data_dir / f"{base}-notes.txt"
    mine.write_text("Project notes about the quarterly pump maintenance schedule. " * 5)

    r = upload(api.url, key_a, secret, document_id="plan")
    assert r.status_code == 202, r.text
    assert wait_status(api.url, key_a, "plan", {"COMPLETED", "FAILED"})["status"] == "COMPLETED"
    assert httpx.get(f"{api.url}/v1/documents/plan", headers={"X-API-Key": key_b}).status_code == 404

    r = upload(api.url, key_b, mine, document_id="plan")  # the same id: B's own document
    assert r.status_code == 202, r.text
    assert wait_status(api.url, key_b, "plan", {"COMPLETED", "FAILED"})["status"] == "COMPLETED"

    def search(key: str, query: str) -> list[dict]:
        r = httpx.post(f"{api.url}/v1/search", json={"query": query, "k": 10},
                       headers={"X-API-Key": key}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["hits"]

    deadline = time.time() + 60
    while not (hits_a := search(key_a, "zebrafish merger")) and time.time() < deadline:
        time.sleep(1)
    assert hits_a and all("zebrafish" in h["text"] for h in hits_a[:1])
    assert all("zebrafish" not in h["text"] for h in search(key_b, "zebrafish merger"))
    assert all("pump" not in h["text"] for h in search(key_a, "pump maintenance schedule"))
    got_a = httpx.get(f"{api.url}/v1/documents/plan", headers={"X-API-Key": key_a}).json()
    assert got_a["version"] == 1 and got_a["project"] == a and got_a["document_id"] == "plan"
    assert got_a["filename"] == secret.name


@pytest.mark.integration
def test_same_named_files_in_two_folders_are_two_documents(stack, worker, tmp_path, project):
    """Failure 2: ``ragstream ingest DIR`` with ``a/notes.txt`` and ``b/notes.txt``
    gives two documents at v1, both completed (before: one document at v2)."""
    for sub, word in (("a", "heron"), ("b", "otter")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "notes.txt").write_text(f"Field notes about the {word} colony. " * 20)
    outcome = ingest([tmp_path], project)
    assert len({r.document_id for r in outcome.results}) == 2
    assert {r.version for r in outcome.results} == {1}
    assert {outcome.last[r.document_id].status for r in outcome.results} == {"COMPLETED"}


@pytest.mark.integration
@pytest.mark.slow
def test_api_fuzz_finds_no_server_error_and_no_cross_project_read(api, stack, tmp_path):
    """Schemathesis against the app's own OpenAPI document with project B's key, while
    project A (a name one character away) holds a COMPLETED document with a marker:
    no response is a 5xx, and none carries A's marker, file name or scoped id
    (tests/fuzz_hooks.py).  Bounded: 25 examples per operation, one worker, a seed."""
    import subprocess
    import sys
    from pathlib import Path

    from api_helpers import create_key, upload, wait_status

    base = "t" + uuid.uuid4().hex[:8]
    a, b = f"{base}-x", f"{base}_x"
    marker = f"narwhal{uuid.uuid4().hex[:8]}"
    secret = tmp_path / f"{marker}.txt"
    secret.write_text(f"The {marker} account holds the settlement figures. " * 4)
    key_a = create_key(a)
    r = upload(api.url, key_a, secret, document_id="shared")
    assert r.status_code == 202, r.text
    assert wait_status(api.url, key_a, "shared", {"COMPLETED", "FAILED"})["status"] == "COMPLETED"
    key_b = create_key(b)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(root / "tests" / "fuzz_hooks.py"),
           "RAGSTREAM_FUZZ_FORBIDDEN": ",".join([marker, scoped_id(a, "shared")]),
           "RAGSTREAM_FUZZ_SEEN": str(tmp_path / "seen.txt")}
    started = time.monotonic()
    out = subprocess.run(
        [str(Path(sys.executable).parent / "st"), "run", f"{api.url}/openapi.json",
         "-H", f"X-API-Key: {key_b}", "--checks", "not_a_server_error,no_cross_project_data",
         "--max-examples", "25", "--exclude-path", "/v1/status/stream", "--workers", "1",
         "--seed", "20261203", "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    took = time.monotonic() - started
    tail = "\n".join(out.stdout.splitlines()[-30:])
    failures = out.stdout.split("FAILURES", 1)[-1][:6000] if "FAILURES" in out.stdout else ""
    print(f"\nfuzz: {took:.0f} s\n{failures}\n{tail}")
    assert out.returncode == 0, failures + tail
    seen = (tmp_path / "seen.txt").read_text().splitlines()
    print(f"fuzz: {len(seen)} responses checked for project {a}'s data")
    assert len(seen) >= 500 and "passed" in out.stdout, tail  # 608 cases at seed 20261203


def test_the_fuzz_check_fails_on_another_projects_data(monkeypatch, tmp_path):
    """The fuzz's check (tests/fuzz_hooks.py) raises on a response holding a forbidden
    string and records each response it saw: it can fail."""
    import importlib
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    monkeypatch.setenv("RAGSTREAM_FUZZ_FORBIDDEN", "narwhal1,acme.doc")
    monkeypatch.setenv("RAGSTREAM_FUZZ_SEEN", str(tmp_path / "seen.txt"))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    sys.modules.pop("fuzz_hooks", None)
    hooks = importlib.import_module("fuzz_hooks")
    case = SimpleNamespace(method="GET", path="/v1/documents/{document_id}")
    hooks.no_cross_project_data(None, SimpleNamespace(content=b'{"id": "x"}', status_code=200), case)
    with pytest.raises(AssertionError, match="another project's data"):
        hooks.no_cross_project_data(None, SimpleNamespace(content=b'{"f": "narwhal1.txt"}',
                                                          status_code=200), case)
    assert len((tmp_path / "seen.txt").read_text().splitlines()) == 2
