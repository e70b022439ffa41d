"""The PostgreSQL backup of deploy/k8s/backup.yaml, run for real: the CronJob's own
shell script (taken from the manifest) with this machine's pg_dump against the
embedded PostgreSQL (its own data directory and a free port: only the postgres
service), then restored with the runbook's pg_restore into an emptied database.

What is checked after the restore: the version ledger (a registered version, its raw
key) and a document's data key, byte for byte (without it every sealed record on the
topics opens blank, README "Backups and restore"); and that the script keeps only
BACKUP_KEEP dumps.  Kafka, the object store and Milvus are not restored here.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, free_port_block, run

BACKUP = ROOT / "deploy" / "k8s" / "backup.yaml"


def _cronjob_container() -> dict:
    (job,) = [d for d in yaml.safe_load_all(BACKUP.read_text()) if d["kind"] == "CronJob"]
    (c,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return c


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    """Settings of a PostgreSQL of this module's own (started, stopped at the end)."""
    import devstack
    from streams.settings import Settings

    port = free_port_block(1)
    settings = Settings(data_dir=tmp_path_factory.mktemp("pg-backup"), pg_port=port,
                        pg_dsn=f"postgresql://ragstream@127.0.0.1:{port}/ragstream")
    try:
        devstack.up(settings, names=["postgres"], timeout_s=120)
        yield settings
    finally:
        devstack.down(settings, names=["postgres"])


async def _write_state(dsn: str) -> tuple[str, bytes]:
    from adapters.document_keys import DocumentKeys
    from adapters.metadata import Metadata
    from adapters.migrations import upgrade_head

    await upgrade_head(dsn)
    async with Metadata(dsn) as md:
        alloc = await md.register_version(
            document_id="backup.doc-1", project="backup", category="default", filename="doc-1.txt",
            sha256="ab" * 32, size=3, raw_key_for=lambda v: f"raw/backup/default/v{v}/backup.doc-1.txt")
        assert alloc.version == 1
        key = await DocumentKeys(md.pool).key_for("backup.doc-1", alloc.version)
    return alloc.raw_key, key


async def _read_state(dsn: str) -> tuple[str, bytes]:
    from adapters.document_keys import DocumentKeys
    from adapters.metadata import Metadata

    async with Metadata(dsn) as md:
        raw_key = await md.pool.fetchval(
            "SELECT raw_key FROM document_versions WHERE document_id = $1 AND version = 1", "backup.doc-1")
        key = await DocumentKeys(md.pool).existing_key("backup.doc-1", 1)
    return raw_key, key


async def _empty_database(settings) -> None:
    import asyncpg

    conn = await asyncpg.connect(host="127.0.0.1", port=settings.pg_port, user="postgres", database="postgres")
    try:
        await conn.execute("DROP DATABASE ragstream WITH (FORCE)")
        await conn.execute('CREATE DATABASE ragstream OWNER "ragstream"')
    finally:
        await conn.close()


def test_the_cronjob_script_dumps_what_a_restore_needs(postgres, tmp_path):
    dsn = postgres.pg_dsn
    written = run(_write_state(dsn))
    c = _cronjob_container()
    (script,) = c["args"]
    env_names = {e["name"] for e in c["env"]}
    assert env_names == {"BACKUP_DIR", "BACKUP_KEEP", "RAGSTREAM_PG_DSN"}
    # two older dumps beside it: with BACKUP_KEEP=2 the oldest goes
    for stamp in ("20000101T000000Z", "20000102T000000Z"):
        (tmp_path / f"ragstream-{stamp}.dump").write_bytes(b"old")
    out = subprocess.run([*c["command"], script], capture_output=True, text=True, timeout=120,
                         env={"PATH": os.environ["PATH"], "BACKUP_DIR": str(tmp_path), "BACKUP_KEEP": "2",
                              "RAGSTREAM_PG_DSN": dsn})
    assert out.returncode == 0, out.stderr
    dumps = sorted(p.name for p in tmp_path.glob("ragstream-*.dump"))
    assert len(dumps) == 2 and dumps[0] == "ragstream-20000102T000000Z.dump", dumps
    assert not list(tmp_path.glob("*.partial"))
    newest = tmp_path / dumps[1]

    run(_empty_database(postgres))
    with pytest.raises(Exception):
        run(_read_state(dsn))  # the tables are gone
    restore = subprocess.run(["pg_restore", "--clean", "--if-exists", "--no-owner", "-d", dsn, str(newest)],
                             capture_output=True, text=True, timeout=120)
    assert restore.returncode == 0, restore.stderr
    assert run(_read_state(dsn)) == written
    assert len(written[1]) == 32
