"""Free loopback ports for stacks and benchmarks started beside others."""
from __future__ import annotations

import random
import socket


def free_port_block(n: int, extra_offsets: tuple[int, ...] = (), lo: int = 12000, hi: int = 22000) -> int:
    """First port ``base`` of ``n`` consecutive free 127.0.0.1 ports in ``lo``..``hi``
    (random start, so concurrent callers rarely collide) whose ``base + offset``
    ports (``extra_offsets``) are free too.  A bind test: racy by nature (a port
    free now may be taken before use).  The default range keeps clear of the
    test stack's fixed 2xxxx ports.  Raises RuntimeError after 200 tries."""
    for _ in range(200):
        base = random.randrange(lo, hi - n)
        socks = []
        try:
            for port in [*range(base, base + n), *(base + o for o in extra_offsets)]:
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
