"""Schema migrations (adapters/migrations, Alembic) against a real PostgreSQL.

Each test works in a schema of its own (``?search_path=`` in the DSN: asyncpg passes
it as a server setting), so it starts from an empty database without needing the
right to create databases.  Only PostgreSQL of the test stack is started (the rest
of the stack is not needed); it is stopped again if this module started it.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg
import pytest

from adapters.migrations import LOCK_KEY, current_revision, head_revision, upgrade_head
from tests.conftest import run

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "adapters" / "migrations" / "versions" / "0001_baseline.py"

# the tables as the hand-written migrate() functions of 2026-11 first created them,
# before document_versions grew queued_at / callback_url / content_type
OLD_DOCUMENT_VERSIONS = """
CREATE TABLE document_versions (
    document_id text NOT NULL,
    version     integer NOT NULL,
    project     text NOT NULL,
    category    text NOT NULL,
    filename    text NOT NULL,
    sha256      text NOT NULL,
    size        bigint NOT NULL,
    raw_key     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, version)
)
"""


@pytest.fixture(scope="module")
def pg(settings):
    """The test stack's PostgreSQL (started alone when it is not running)."""
    import devstack

    was_up = devstack.status(settings, names=["postgres"])["postgres"].healthy
    devstack.up(settings, names=["postgres"], timeout_s=120)
    yield settings.pg_dsn
    if not was_up:
        devstack.down(settings, names=["postgres"])


@pytest.fixture
def schema_dsn(pg):
    """A DSN whose tables land in a fresh, empty schema (dropped afterwards)."""
    schema = "mig_" + uuid.uuid4().hex[:10]

    async def sql(statement):
        conn = await asyncpg.connect(pg)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    run(sql(f"CREATE SCHEMA {schema}"))
    yield f"{pg}?search_path={schema}"
    run(sql(f"DROP SCHEMA {schema} CASCADE"))


async def _shape(dsn: str) -> dict:
    """Columns, constraints and indexes of the schema the DSN writes into."""
    conn = await asyncpg.connect(dsn)
    try:
        columns = await conn.fetch(
            "SELECT table_name, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = current_schema()"
            " ORDER BY table_name, column_name")
        constraints = await conn.fetch(
            "SELECT c.conrelid::regclass::text AS tbl, pg_get_constraintdef(c.oid) AS def"
            " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
            " WHERE n.nspname = current_schema() ORDER BY 1, 2")
        indexes = await conn.fetch(
            "SELECT tablename, indexname, regexp_replace(indexdef, ' ON \\S+\\.', ' ON ') AS def"
            " FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2")
        return {"columns": [tuple(r) for r in columns],
                "constraints": [tuple(r) for r in constraints],
                "indexes": [tuple(r) for r in indexes]}
    finally:
        await conn.close()


def _legacy_sql() -> list[str]:
    """The baseline's statements, as the old migrate() functions ran them."""
    namespace: dict = {}
    exec(compile(BASELINE.read_text(), str(BASELINE), "exec"), namespace)
    return [s.strip() for sql in (namespace["METADATA"], namespace["LEDGER"], namespace["API_KEYS"],
                                  namespace["CALLBACKS"], namespace["PROFILES"])
            for s in sql.split(";") if s.strip()]


def test_fresh_database_reaches_head_and_stays(schema_dsn):
    async def scenario():
        before = await current_revision(schema_dsn)
        first = await upgrade_head(schema_dsn)
        again = await upgrade_head(schema_dsn)
        return before, first, again, await _shape(schema_dsn)

    before, first, again, shape = run(scenario())
    assert before is None and first == again == head_revision() == "0011_profile_chunking"
    tables = {c[0] for c in shape["columns"]}
    assert tables == {"alembic_version", "document_versions", "documents", "version_outcomes",
                      "document_deletions", "version_steps", "api_keys", "project_secrets",
                      "callbacks", "pipeline_profiles", "embedding_cache",
                      "document_keys", "embedding_cache_uses", "version_failed_parts",
                      "source_objects"}
    assert ("document_versions", "error_code", "text", "YES", None) in shape["columns"]


def test_database_of_the_old_migrate_upgrades_in_place(pg, schema_dsn):
    """Tables made by the hand-written migrate() (some in an older shape, with rows)
    upgrade to head, keep their rows, and end exactly like a fresh database."""
    async def scenario():
        conn = await asyncpg.connect(schema_dsn)
        try:
            await conn.execute(OLD_DOCUMENT_VERSIONS)
            await conn.execute(
                "INSERT INTO document_versions VALUES ('d1', 1, 'p', 'default', 'a.txt', 'ab', 3, 'raw/k')")
            for statement in _legacy_sql():
                await conn.execute(statement)
            await conn.execute("INSERT INTO api_keys (key_id, project, key_hash) VALUES ('k', 'p', 'h')")
        finally:
            await conn.close()
        revision = await upgrade_head(schema_dsn)
        conn = await asyncpg.connect(schema_dsn)
        try:
            row = await conn.fetchrow("SELECT * FROM document_versions")
            keys = await conn.fetchval("SELECT count(*) FROM api_keys")
        finally:
            await conn.close()
        return revision, dict(row), keys, await _shape(schema_dsn)

    revision, row, keys, upgraded = run(scenario())
    assert revision == head_revision()
    assert row["raw_key"] == "raw/k" and row["queued_at"] is None and row["error_code"] is None
    assert keys == 1

    fresh_schema = "mig_" + uuid.uuid4().hex[:10]

    async def fresh():
        conn = await asyncpg.connect(pg)
        await conn.execute(f"CREATE SCHEMA {fresh_schema}")
        await conn.close()
        dsn = f"{pg}?search_path={fresh_schema}"
        try:
            await upgrade_head(dsn)
            return await _shape(dsn)
        finally:
            conn = await asyncpg.connect(pg)
            await conn.execute(f"DROP SCHEMA {fresh_schema} CASCADE")
            await conn.close()

    assert upgraded == run(fresh())


def test_concurrent_starts_do_not_race(schema_dsn):
    """Four processes upgrading an empty database at once (as the API and the
    workers do at start-up): every one ends at head, one alembic_version row."""
    env = {**os.environ, "RAGSTREAM_PG_DSN": schema_dsn}
    procs = [subprocess.Popen([str(Path(sys.executable).with_name("ragstream")), "db", "upgrade"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-2000:] for _, err in outs]
    assert [out.strip().splitlines()[-1] for out, _ in outs] == [f"revision={head_revision()}"] * 4

    async def versions():
        conn = await asyncpg.connect(schema_dsn)
        try:
            return [r[0] for r in await conn.fetch("SELECT version_num FROM alembic_version")]
        finally:
            await conn.close()

    assert run(versions()) == [head_revision()]


def test_tasks_of_one_process_take_turns(schema_dsn):
    async def scenario():
        return await asyncio.gather(*(upgrade_head(schema_dsn) for _ in range(3)))

    assert run(scenario()) == [head_revision()] * 3


def test_upgrade_waits_for_the_lock_holder(schema_dsn):
    """While another session holds the migration lock, an upgrade waits for it."""
    async def scenario():
        holder = await asyncpg.connect(schema_dsn)
        try:
            await holder.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
            task = asyncio.create_task(upgrade_head(schema_dsn))
            waited = not (await asyncio.wait({task}, timeout=3.0))[0]
            before = await current_revision(schema_dsn)
            await holder.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
            return waited, before, await asyncio.wait_for(task, 60)
        finally:
            await holder.close()

    waited, before, after = run(scenario())
    assert waited and before is None and after == head_revision()


def test_cli_db_upgrade_and_current(schema_dsn):
    env = {**os.environ, "RAGSTREAM_PG_DSN": schema_dsn}
    cli = [str(Path(sys.executable).with_name("ragstream")), "db"]
    behind = subprocess.run([*cli, "current"], env=env, capture_output=True, text=True, timeout=120)
    assert behind.returncode == 1 and f"revision=None head={head_revision()}" in behind.stdout
    up = subprocess.run([*cli, "upgrade", "0001_baseline"], env=env, capture_output=True, text=True,
                        timeout=120)
    assert up.returncode == 0, up.stderr
    assert up.stdout.strip().splitlines()[-1] == "revision=0001_baseline"
    up = subprocess.run([*cli, "upgrade"], env=env, capture_output=True, text=True, timeout=120)
    assert up.stdout.strip().splitlines()[-1] == f"revision={head_revision()}", up.stderr
    now = subprocess.run([*cli, "current"], env=env, capture_output=True, text=True, timeout=120)
    assert now.returncode == 0 and now.stdout.strip() == f"revision={head_revision()} head={head_revision()}"
