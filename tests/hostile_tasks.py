"""Task functions for tests/test_hostile.py run in the spawn pool (importable by name)."""
from __future__ import annotations

import resource


def address_space_cap_mb() -> int:
    """The RLIMIT_AS soft limit of this (pool) process in MiB (-1: none)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return -1 if soft == resource.RLIM_INFINITY else soft // (1024 * 1024)


def partition(path: str, filetype: str) -> list[dict]:
    """``stages.partition.partition_file`` with the default profile."""
    from stages.partition import partition_file
    from stages.profiles import Profile

    return partition_file(path, filetype, Profile(name="default"))
