"""Category profiles in PostgreSQL (asyncpg): a new category is a row, not a deploy.

Table ``pipeline_profiles`` (created by the revisions in adapters/migrations/), one
row per category, one column per ``stages.profiles.Profile`` field:

=====================  ==================  ==========================================
column                 type                meaning (see ``Profile``)
=====================  ==================  ==========================================
category               text PRIMARY KEY    the upload's ``category`` (``Profile.name``)
strategy               text                auto / fast / ocr_only / hi_res
ocr_languages          text[]              tesseract codes, e.g. ``{eng,deu}``
extract_tables         boolean             tables as HTML (pdfplumber / scanned-table OCR)
extract_images         boolean             PDF images as Image elements
convert_office_to_pdf  boolean             DOCX/PPTX/XLSX through LibreOffice first
use_vlm                boolean             summaries of tables/images by the VLM
filetypes              text[]              accepted detected types (by content)
max_size_bytes         bigint              larger files fail (TooLarge)
timeout_s              double precision    per conversion / partition call, seconds
max_pages_per_task     integer             page-range size for large PDFs
allow_partial          boolean             a failed part leaves the rest COMPLETED (0007)
chunking               text                fit / characters (0011)
updated_at             timestamptz         last change
=====================  ==================  ==========================================

``seed_defaults`` fills the table from ``DEFAULT_PROFILES`` when it is empty (only
then: an operator's edits and deletions are never overwritten).  That is data, not
schema, so it is not a migration: the defaults live in code and may change.  ``load_profile(category)``
is what workers call: it caches each category for ``PROFILE_TTL_S`` seconds, so a
``ragstream profiles set`` reaches every worker within that time.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Optional

import asyncpg

from adapters.migrations import upgrade_head
from adapters.pg_pool import create_pool
from stages.profiles import DEFAULT_PROFILES, Profile, get_profile

log = logging.getLogger(__name__)

PROFILE_TTL_S = 30.0   # how long load_profile trusts a cached row
FALLBACK_CATEGORY = "default"

COLUMNS = ("category", "strategy", "ocr_languages", "extract_tables", "extract_images",
           "convert_office_to_pdf", "use_vlm", "filetypes", "max_size_bytes", "timeout_s",
           "max_pages_per_task", "allow_partial", "chunking")
UPSERT = f"""
INSERT INTO pipeline_profiles ({", ".join(COLUMNS)}, updated_at)
VALUES ({", ".join(f"${i}" for i in range(1, len(COLUMNS) + 1))}, now())
ON CONFLICT (category) DO UPDATE SET
    {", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS[1:])}, updated_at = now()
"""
SEED = f"""
INSERT INTO pipeline_profiles ({", ".join(COLUMNS)})
SELECT {", ".join(f"${i}" for i in range(1, len(COLUMNS) + 1))}
WHERE NOT EXISTS (SELECT 1 FROM pipeline_profiles)
"""


def profile_to_row(profile: Profile) -> tuple:
    """Profile → the column values of ``COLUMNS`` (lists for the array columns)."""
    return (profile.name, profile.strategy, list(profile.ocr_languages), profile.extract_tables,
            profile.extract_images, profile.convert_office_to_pdf, profile.use_vlm,
            sorted(profile.filetypes), int(profile.max_size_bytes), float(profile.timeout_s),
            int(profile.max_pages_per_task), bool(profile.allow_partial), profile.chunking)


def row_to_profile(row) -> Profile:
    """A ``pipeline_profiles`` record → Profile (``category`` becomes ``name``).

    Raises:
        ValueError: a strategy the code does not know (a row written by a newer version).
    """
    data = dict(row)
    data["name"] = data.pop("category")
    data.pop("updated_at", None)
    return Profile.from_dict(data)


class ProfileStore:
    """The ``pipeline_profiles`` table behind an asyncpg pool.

    Use as ``async with ProfileStore(dsn) as store:`` (opens a small pool), or pass an
    existing ``pool`` (then the caller closes it).
    """

    def __init__(self, dsn: str | None = None, pool: Optional[asyncpg.Pool] = None):
        self.dsn = dsn
        self.pool = pool
        self._own_pool = pool is None

    async def __aenter__(self) -> "ProfileStore":
        if self.pool is None:
            self.pool = await create_pool(self.dsn, min_size=1, max_size=2)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._own_pool and self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def seed_defaults(self, seed: dict[str, Profile] | None = None) -> int:
        """Seed the table when it is empty (the schema must be at head:
        ``adapters.migrations.upgrade_head``).

        Args:
            seed: profiles to insert into an empty table (default ``DEFAULT_PROFILES``).
        Returns:
            the number of rows inserted (0 when the table already had rows).
        Safe to run concurrently (transaction-scoped advisory lock).
        """
        seed = DEFAULT_PROFILES if seed is None else seed
        async with self.pool.acquire() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(727002)")
                if await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pipeline_profiles)"):
                    return 0
                for name, profile in seed.items():
                    if profile.name != name:
                        profile = Profile.from_dict({**profile.to_dict(), "name": name})
                    await conn.execute(UPSERT, *profile_to_row(profile))
                return len(seed)

    async def list(self) -> list[Profile]:
        """Every stored profile, ordered by category."""
        rows = await self.pool.fetch(f"SELECT {', '.join(COLUMNS)} FROM pipeline_profiles ORDER BY category")
        return [row_to_profile(r) for r in rows]

    async def get(self, category: str) -> Optional[Profile]:
        """The stored profile of ``category``, or None."""
        row = await self.pool.fetchrow(
            f"SELECT {', '.join(COLUMNS)} FROM pipeline_profiles WHERE category = $1", category)
        return row_to_profile(row) if row is not None else None

    async def put(self, profile: Profile) -> None:
        """Insert or replace the row of ``profile.name`` (all columns)."""
        await self.pool.execute(UPSERT, *profile_to_row(profile))

    async def delete(self, category: str) -> bool:
        """Remove ``category``'s row; True when it existed."""
        status = await self.pool.execute("DELETE FROM pipeline_profiles WHERE category = $1", category)
        return status.endswith(" 1")


# --- the cached reader the agents call ----------------------------------------------

_cache: dict[str, tuple[float, Profile]] = {}
_pools: dict[int, tuple[asyncio.AbstractEventLoop, asyncpg.Pool]] = {}
_migrated: set[str] = set()


async def _pool(dsn: str) -> asyncpg.Pool:
    """One small pool per event loop (tests and CLIs run several loops in a process)."""
    loop = asyncio.get_running_loop()
    entry = _pools.get(id(loop))
    if entry is None or entry[0] is not loop:
        pool = await create_pool(dsn, min_size=1, max_size=2)
        _pools[id(loop)] = (loop, pool)
        return pool
    return entry[1]


async def load_profile(category: str | None, dsn: str | None = None,
                       ttl_s: float = PROFILE_TTL_S) -> Profile:
    """The profile for ``category`` from ``pipeline_profiles``, cached for ``ttl_s`` seconds.

    An unknown category gets the ``"default"`` row (as ``get_profile`` does).  The
    first call in a process upgrades the schema to head and seeds the table if empty.

    Args:
        category: the upload's category (None or "" means ``"default"``).
        dsn: PostgreSQL DSN (default: ``streams.settings.get_settings().pg_dsn``).
        ttl_s: cache lifetime in seconds (0 reads the database every time).
    Returns:
        the Profile (``name`` is the row's category: ``"default"`` for unknown ones).
    Errors:
        never raises for database trouble: when PostgreSQL is unreachable or a row
        is invalid it logs a warning and returns the last cached profile of that
        category, else the built-in ``get_profile(category)``.
    """
    category = category or FALLBACK_CATEGORY
    now = time.monotonic()
    hit = _cache.get(category)
    if hit is not None and hit[0] > now and ttl_s > 0:
        return hit[1]
    if dsn is None:
        from streams.settings import get_settings

        dsn = get_settings().pg_dsn
    try:
        store = ProfileStore(pool=await _pool(dsn))
        if dsn not in _migrated:
            await upgrade_head(dsn)
            await store.seed_defaults()
            _migrated.add(dsn)
        profile = await store.get(category)
        if profile is None and category != FALLBACK_CATEGORY:
            profile = await store.get(FALLBACK_CATEGORY)
        if profile is None:
            profile = get_profile(category)
    except Exception as exc:
        from agents.retry_policy import is_transient  # lazy: agents imports this module's callers

        if not (is_transient(exc) or isinstance(exc, (asyncpg.PostgresError, ValueError))):
            raise
        fallback = hit[1] if hit is not None else get_profile(category)
        log.warning("profiles: cannot read %r from PostgreSQL (%s); using %s profile %r",
                    category, exc, "cached" if hit is not None else "built-in", fallback.name)
        return fallback
    _cache[category] = (now + ttl_s, profile)
    return profile


def clear_profile_cache() -> None:
    """Forget cached profiles (the next ``load_profile`` reads PostgreSQL)."""
    _cache.clear()


async def close_profile_pools() -> None:
    """Close the pools ``load_profile`` opened on the running event loop."""
    loop = asyncio.get_running_loop()
    entry = _pools.pop(id(loop), None)
    if entry is not None:
        await entry[1].close()
