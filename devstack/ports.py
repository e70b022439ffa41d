"""Free loopback ports for stacks and benchmarks started beside others.

Two environment variables let processes that run side by side pick ports that cannot
meet (scripts/test.sh runs two pytest processes at once):

- ``RAGSTREAM_FREE_PORTS=lo-hi``: the range :func:`free_port_block` draws from by
  default (else 12000-22000); give each process its own.
- ``RAGSTREAM_RESERVED_PORTS=a,b-c,...``: ports never handed out, even while free
  (the fixed ports of a stack that may not have started yet: tests/conftest.py).
"""
from __future__ import annotations

import os
import random
import socket

DEFAULT_RANGE = (12000, 22000)


def _parse_ranges(text: str, var: str) -> list[tuple[int, int]]:
    """``"a,b-c"`` → ``[(a, a), (b, c)]``; ValueError naming ``var`` when malformed."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        lo, sep, hi = item.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"{var}: {item!r} is not a port or a lo-hi range") from None
        if not 0 < a <= b < 65536:
            raise ValueError(f"{var}: {item!r} is not within 1-65535 in order")
        out.append((a, b))
    return out


def port_range() -> tuple[int, int]:
    """``RAGSTREAM_FREE_PORTS`` as ``(lo, hi)``, else :data:`DEFAULT_RANGE`.  Raises
    ValueError when it is not one ``lo-hi`` range."""
    text = os.environ.get("RAGSTREAM_FREE_PORTS", "").strip()
    if not text:
        return DEFAULT_RANGE
    ranges = _parse_ranges(text, "RAGSTREAM_FREE_PORTS")
    if len(ranges) != 1 or ranges[0][0] == ranges[0][1]:
        raise ValueError(f"RAGSTREAM_FREE_PORTS={text!r}: expected one lo-hi range")
    return ranges[0]


def reserved_ports() -> frozenset[int]:
    """The ports ``RAGSTREAM_RESERVED_PORTS`` names (ValueError when malformed)."""
    ranges = _parse_ranges(os.environ.get("RAGSTREAM_RESERVED_PORTS", ""), "RAGSTREAM_RESERVED_PORTS")
    return frozenset(p for a, b in ranges for p in range(a, b + 1))


def free_port_block(n: int, extra_offsets: tuple[int, ...] = (), lo: int | None = None,
                    hi: int | None = None) -> int:
    """First port ``base`` of ``n`` consecutive free 127.0.0.1 ports in ``lo``..``hi``
    (default :func:`port_range`; random start, so concurrent callers rarely collide)
    whose ``base + offset`` ports (``extra_offsets``) are free too, none of them
    reserved (:func:`reserved_ports`).  A bind test: racy by nature (a port free now
    may be taken before use), hence the per-process ranges.  The default range keeps
    clear of the test stack's fixed 2xxxx ports and below Linux's ephemeral range
    (32768+), where any outgoing connection may hold a port.  Raises RuntimeError
    after 200 tries."""
    if lo is None or hi is None:
        lo, hi = port_range()
    reserved = reserved_ports()
    for _ in range(200):
        base = random.randrange(lo, hi - n)
        wanted = [*range(base, base + n), *(base + o for o in extra_offsets)]
        if reserved.intersection(wanted):
            continue
        socks = []
        try:
            for port in wanted:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no block of {n} free ports in {lo}-{hi}")
