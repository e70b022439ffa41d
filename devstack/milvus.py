"""The embedded Milvus: Milvus Lite in server mode (``milvus-lite server``) on
loopback.  Registered with the supervisor on import.
"""
from __future__ import annotations

import asyncio
from urllib.parse import urlparse

from devstack.supervisor import LOOPBACK, Paths, Service, register, venv_bin
from streams.settings import Settings

# ---------------------------------------------------------------- milvus (Milvus Lite)


def _milvus_port(settings: Settings) -> int:
    return urlparse(settings.milvus_uri).port or 19530


def _milvus_command(settings: Settings, paths: Paths) -> list[str]:
    return [venv_bin("milvus-lite"), "server", "--data-dir", str(paths.data),
            "--host", LOOPBACK, "--port", str(_milvus_port(settings))]


async def _milvus_health(settings: Settings) -> None:
    def check() -> None:
        from pymilvus import MilvusClient

        # a dedicated connection: pymilvus's shared one per address can outlive a
        # restarted server in this (long-lived) process
        client = MilvusClient(uri=settings.milvus_uri, timeout=5, dedicated=True)
        try:
            client.list_collections()
        finally:
            client.close()

    await asyncio.to_thread(check)


MILVUS = Service(
    name="milvus",
    command=_milvus_command,
    health=_milvus_health,
    ports=lambda s: [_milvus_port(s)],
    endpoint=lambda s: s.milvus_uri,
)


register(MILVUS)
