"""Category profiles in PostgreSQL: seeding, upserts, the cached reader and the CLI,
against the test stack's real PostgreSQL."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from adapters.migrations import upgrade_head
from adapters.profiles_store import (ProfileStore, clear_profile_cache, close_profile_pools,
                                     load_profile)
from stages.profiles import DEFAULT_PROFILES, Profile, get_profile
from tests.conftest import run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_table(stack):
    """pipeline_profiles (schema at head) emptied before the test and re-seeded afterwards."""
    async def empty():
        await upgrade_head(stack.pg_dsn)
        conn = await asyncpg.connect(stack.pg_dsn)
        try:
            await conn.execute("DELETE FROM pipeline_profiles")
        finally:
            await conn.close()

    run(empty())
    clear_profile_cache()
    yield stack.pg_dsn
    run(empty())
    run(_in_store(stack.pg_dsn, lambda s: s.seed_defaults()))
    clear_profile_cache()


async def _in_store(dsn, fn):
    async with ProfileStore(dsn) as store:
        return await fn(store)


def test_seed_defaults_once(fresh_table):
    dsn = fresh_table

    async def scenario(store):
        first = await store.seed_defaults()
        again = await store.seed_defaults()
        return first, again, await store.list()

    first, again, stored = run(_in_store(dsn, scenario))
    assert first == len(DEFAULT_PROFILES) and again == 0
    assert {p.name: p for p in stored} == DEFAULT_PROFILES


def test_new_category_is_a_row_and_edits_survive_seeding(fresh_table):
    dsn = fresh_table
    invoices = Profile(name="invoices", strategy="hi_res", ocr_languages=("eng", "deu"),
                       extract_images=False, use_vlm=False, filetypes={"pdf", "png"},
                       max_size_bytes=5 * 2**20, timeout_s=90.0, max_pages_per_task=8,
                       chunking="characters")

    async def scenario(store):
        await store.seed_defaults()
        await store.put(invoices)
        await store.delete("legal")
        await store.seed_defaults()  # not empty: seeds nothing, keeps the deletion
        return await store.get("invoices"), await store.get("legal"), await store.delete("legal")

    got, legal, deleted_twice = run(_in_store(dsn, scenario))
    assert got == invoices and legal is None and deleted_twice is False


def test_load_profile_caches_and_falls_back(fresh_table):
    dsn = fresh_table

    async def scenario():
        try:
            unknown = await load_profile("no-such-category", dsn=dsn)  # upgrades + seeds
            async with ProfileStore(dsn) as store:
                await store.put(Profile(name="reports", strategy="fast"))
            cached = await load_profile("reports", dsn=dsn)
            async with ProfileStore(dsn) as store:
                await store.put(Profile(name="reports", strategy="ocr_only"))
            still_cached = await load_profile("reports", dsn=dsn)
            fresh = await load_profile("reports", dsn=dsn, ttl_s=0)
            clear_profile_cache()
            after_clear = await load_profile("reports", dsn=dsn)
            return unknown, cached, still_cached, fresh, after_clear
        finally:
            await close_profile_pools()

    unknown, cached, still_cached, fresh, after_clear = run(scenario())
    assert unknown == DEFAULT_PROFILES["default"]
    assert cached.strategy == "fast" and still_cached.strategy == "fast"
    assert fresh.strategy == "ocr_only" and after_clear.strategy == "ocr_only"


def test_load_profile_without_database_uses_built_in():
    clear_profile_cache()

    async def scenario():
        try:
            return await load_profile("scanned", dsn="postgresql://ragstream@127.0.0.1:9/ragstream")
        finally:
            await close_profile_pools()

    assert run(scenario()) == get_profile("scanned")
    clear_profile_cache()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", "profiles", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_profiles_cli_set_list_delete(fresh_table):
    out = _cli("set", "invoices", "--strategy", "hi_res", "--ocr-languages", "eng,deu", "--no-images",
               "--no-vlm", "--max-size-mb", "5", "--timeout-s", "90")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["name"] == "invoices" and row["strategy"] == "hi_res"
    assert row["ocr_languages"] == ["eng", "deu"] and row["extract_images"] is False
    assert row["use_vlm"] is False and row["max_size_bytes"] == 5 * 2**20 and row["timeout_s"] == 90
    assert row["extract_tables"] is True  # untouched options come from 'default'
    out = _cli("set", "invoices", "--timeout-s", "120")  # changes only that option
    assert json.loads(out.stdout)["strategy"] == "hi_res" and json.loads(out.stdout)["timeout_s"] == 120

    listed = _cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    names = [json.loads(line)["name"] for line in listed.stdout.splitlines()]
    assert names == sorted(set(DEFAULT_PROFILES) | {"invoices"})
    table = _cli("list")
    assert "invoices" in table.stdout and "hi_res" in table.stdout

    bad = _cli("set", "invoices", "--strategy", "magic")
    assert bad.returncode == 2 and "unknown strategy 'magic'" in bad.stderr
    bad = _cli("set", "invoices", "--timeout-s", "0")
    assert bad.returncode == 2 and "timeout_s must be positive" in bad.stderr

    assert _cli("delete", "invoices").returncode == 0
    gone = _cli("delete", "invoices")
    assert gone.returncode == 1 and "no profile 'invoices'" in gone.stderr
