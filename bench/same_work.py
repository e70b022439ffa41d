"""``ragstream bench peer``'s same-work comparison: ragstream doing the work the peer does.

The default profile does more than unstructured-ingest: tables recovered as HTML,
images, and chunks sized so the embedder reads every character (the peer's
3,000-character chunks are cut at 256 word pieces).  The same-work run ingests the
same files with the ``basic`` profile (stages/profiles.py: text layer with ``fast``,
OCR only for pages without one, no tables or images, no VLM, ``chunking="characters"``:
by title at 3,000 / 2,400 / 500 characters).  The peer OCRs nothing, so pages it leaves
empty count zero for it, while ragstream's time to OCR them stays in its seconds.

Pages per second, each side over its whole run (ragstream from the first upload to
the last document searchable; the peer without its start-up):

- ``same_work_ratio``: (b) over all files — ragstream's pages of every completed file,
  the peer's pages of the files it gave chunks for;
- ``same_work_ratio_common``: (a) over the files both sides gave chunks for, each
  side's own page count of them.

The peer's per-file figures come from its stdout (``  <file>.json  chunks=N pages=[…]``
lines of ../shared/peers/unstructured_ingest.sh).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bench.e2e import Run

#: the profile of the same-work run (stages/profiles.py DEFAULT_PROFILES)
PROFILE = "basic"
_PER_FILE = re.compile(r"^\s+(\S.*?)\s+chunks=\s*(\d+)\s+pages=\[([^\]]*)\]\s*$")


def peer_per_file(stdout: str) -> dict[str, tuple[int, int]]:
    """``{file relative to the corpus: (chunks, pages)}`` from the peer's per-file
    lines (the ``.json`` its destination adds is taken off; pages = the distinct page
    numbers listed, at least 1 for a file with chunks, 0 without)."""
    out: dict[str, tuple[int, int]] = {}
    for line in stdout.splitlines():
        m = _PER_FILE.match(line)
        if not m:
            continue
        name, chunks = m[1].removesuffix(".json"), int(m[2])
        pages = len([p for p in m[3].split(",") if p.strip()])
        out[name] = (chunks, max(1, pages) if chunks else 0)
    return out


@dataclass(frozen=True)
class SameWork:
    """Pages/s of both sides: ``ours_all``/``peer_all`` over all files (b) and
    ``ours_common``/``peer_common`` over the files both gave chunks for (a), see the
    module docstring; ``common_files`` is how many such files there are."""

    ours_all: float
    peer_all: float
    ours_common: float
    peer_common: float
    common_files: int

    @property
    def ratio_all(self) -> float:
        return self.ours_all / self.peer_all if self.peer_all else 0.0

    @property
    def ratio_common(self) -> float:
        return self.ours_common / self.peer_common if self.peer_common else 0.0


def same_work(ours: Run, corpus: Path, peer_files: dict[str, tuple[int, int]],
              peer_seconds: float) -> Optional[SameWork]:
    """The comparison of ragstream's same-work ``ours`` (its ``per_file`` keyed by path
    under ``corpus``) with the peer's per-file figures over ``peer_seconds`` (without
    start-up).  None when the peer's per-file figures or either side's seconds are
    missing."""
    if not peer_files or not ours.seconds or peer_seconds <= 0:
        return None
    mine = {str(Path(p).relative_to(corpus)): v for p, v in ours.per_file.items()}
    common = [f for f, (chunks, _) in mine.items() if chunks and peer_files.get(f, (0, 0))[0]]
    return SameWork(
        ours_all=sum(pages for chunks, pages in mine.values() if chunks) / ours.seconds,
        peer_all=sum(pages for chunks, pages in peer_files.values() if chunks) / peer_seconds,
        ours_common=sum(mine[f][1] for f in common) / ours.seconds,
        peer_common=sum(peer_files[f][1] for f in common) / peer_seconds,
        common_files=len(common))


def same_work_lines(result: Optional[SameWork]) -> list[str]:
    """``key=value`` lines for the report (``n/a`` without a result); the
    ``same_work_ratio=`` figure itself goes on the report's last line."""
    if result is None:
        return ["same_work_pages_per_s=n/a", "same_work_ratio_common=n/a"]
    return [f"same_work_pages_per_s={result.ours_all:.3f}",
            f"same_work_peer_pages_per_s={result.peer_all:.3f}",
            f"same_work_common_files={result.common_files}",
            f"same_work_ratio_common={result.ratio_common:.3f}"]


async def ensure_profile(dsn: str) -> None:
    """Store the built-in ``basic`` profile when the database has no such row (a
    database seeded before it existed); an operator's own ``basic`` row is kept."""
    from adapters.migrations import upgrade_head
    from adapters.profiles_store import ProfileStore
    from stages.profiles import DEFAULT_PROFILES

    await upgrade_head(dsn)
    async with ProfileStore(dsn) as store:
        await store.seed_defaults()
        if await store.get(PROFILE) is None:
            await store.put(DEFAULT_PROFILES[PROFILE])
