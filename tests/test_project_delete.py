"""``ragstream project delete P`` (streams/project_erasure.py): every document of the
project ends DELETED, every Milvus alias and collection of the project is gone, its
API keys stop working — and a project whose name differs by one character keeps
everything."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ingest, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


def _statuses(stack, project: str) -> dict[str, str]:
    from adapters.metadata import Metadata

    async def read():
        async with Metadata(stack.pg_dsn) as md:
            return {r["document_id"]: r["status"] for r in await md.list_documents(project=project)}
    return run(read())


def test_project_delete_removes_documents_collections_and_keys(stack, worker, tmp_path, project):
    from adapters import collection_aliases as ca
    from adapters.api_keys import ApiKeys
    from adapters.metadata import Metadata
    from adapters.vector_store import VectorStore
    from streams.reindex import reindex

    neighbour = project[:-1] + "_" + project[-1]  # t123_4 beside t1234
    for p in (project, neighbour):
        (tmp_path / p).mkdir()
        (tmp_path / p / "a.md").write_text(f"# Storks of {p}\n\nWhite storks nested on the church roof.\n")
        (tmp_path / p / "b.md").write_text(f"# Cranes of {p}\n\nCommon cranes roosted in the fen.\n")
        assert {e.status for e in ingest([tmp_path / p], p).last.values()} == {"COMPLETED"}
    run(reindex(project, settings=stack))  # v1 and v2: both must go

    async def make_key() -> str:
        async with Metadata(stack.pg_dsn) as md:
            return (await ApiKeys(md.pool).create(project)).key
    key = run(make_key())

    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ragstream"), "project", "delete", project, "--yes",
                          "--json"], env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["documents_deleted"] == 2 and report["keys_revoked"] == 1
    assert ca.physical_name(project, 1) in report["dropped"] and ca.physical_name(project, 2) in report["dropped"]

    deadline = time.time() + 120
    while set(_statuses(stack, project).values()) != {"DELETED"} and time.time() < deadline:
        time.sleep(1)
    assert set(_statuses(stack, project).values()) == {"DELETED"}
    store = VectorStore(stack.milvus_uri)
    try:
        assert ca.physical_versions(store, project) == {}
        assert ca.alias_target(store, ca.alias_name(project)) is None
        assert len(ca.physical_versions(store, neighbour)) == 1
    finally:
        store.close()

    async def verify():
        async with Metadata(stack.pg_dsn) as md:
            return await ApiKeys(md.pool).verify(key)
    assert run(verify()) is None
    assert set(_statuses(stack, neighbour).values()) == {"COMPLETED"}
    # the project made anew: its first document completes through the same worker,
    # whose index stage still remembered the dropped collection (a newcomer's find)
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "c.md").write_text("# Spoonbills\n\nSpoonbills waded in the lagoon.\n")
    again_doc = ingest([tmp_path / "again"], project)
    assert [e.status for e in again_doc.last.values()] == ["COMPLETED"], again_doc.last
    # again: nothing left to do but the new document
    again = subprocess.run([str(ROOT / ".venv" / "bin" / "ragstream"), "project", "delete", project, "--yes",
                            "--json"], env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["documents_deleted"] == 1


def test_project_delete_needs_yes_and_a_valid_name():
    for args in (["t1"], ["bad.name", "--yes"]):
        out = subprocess.run([str(ROOT / ".venv" / "bin" / "ragstream"), "project", "delete", *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr


def test_project_delete_over_http_needs_an_admin_key(api, stack, tmp_path, project):
    """``DELETE /v1/projects/{p}``: a project's key gets 403 (its own project too); an
    admin key deletes (202, the document ends DELETED) but reads no project's data
    (403 on search and documents)."""
    import httpx

    from api_helpers import create_key, upload, wait_status

    key = create_key(project)
    doc = tmp_path / "ibis.txt"
    doc.write_text("The glossy ibis fed on the flooded meadow. " * 3)
    assert upload(api.url, key, doc, document_id="ibis").status_code == 202
    assert wait_status(api.url, key, "ibis", {"COMPLETED", "FAILED"})["status"] == "COMPLETED"
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ragstream"), "apikey", "create", "--admin"],
                         env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    admin = out.stdout.strip().splitlines()[-1]
    assert httpx.delete(f"{api.url}/v1/projects/{project}", headers={"X-API-Key": key}).status_code == 403
    assert httpx.post(f"{api.url}/v1/search", json={"query": "ibis"},
                      headers={"X-API-Key": admin}).status_code == 403
    assert httpx.get(f"{api.url}/v1/documents", headers={"X-API-Key": admin}).status_code == 403
    r = httpx.delete(f"{api.url}/v1/projects/{project}", headers={"X-API-Key": admin}, timeout=120)
    assert r.status_code == 202, r.text
    assert r.json()["documents_deleted"] == 1 and r.json()["keys_revoked"] == 1
    assert httpx.get(f"{api.url}/v1/documents/ibis", headers={"X-API-Key": key}).status_code == 401
    deadline = time.time() + 120
    while _statuses(stack, project) != {f"{project}.ibis": "DELETED"} and time.time() < deadline:
        time.sleep(1)
    assert _statuses(stack, project) == {f"{project}.ibis": "DELETED"}
