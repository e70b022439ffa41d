"""Integration test of the embedded dev stack: up, real round trips, idempotent up, down."""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

import devstack
import devstack.postgres
from devstack.s3 import ensure_bucket
from streams.settings import Settings
from tests.conftest import free_port_block

pytestmark = [pytest.mark.integration, pytest.mark.own_stack, pytest.mark.timeout(300)]

N_PORTS = 17  # broker, postgres, milvus, s3 API + 8 internal SeaweedFS ports, 3 Triton,
#             converter XML-RPC + its LibreOffice UNO port


def _free_port_block(n: int) -> int:
    """``n`` free ports; SeaweedFS admin gRPC sits at s3 API port (base + 3) + 8 + 10000."""
    return free_port_block(n, extra_offsets=(3 + 8 + 10000,))


def _stack_pids(settings: Settings) -> list[int]:
    """Live processes whose working directory is inside ``data_dir`` or inside a
    service's data directory placed outside it (the sandboxed converter's, PostgreSQL's
    under a private parent)."""
    roots = {str(settings.data_dir.resolve())} | {str(devstack.Paths.of(settings, svc.name).data)
                                                  for svc in devstack.services()}
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if any(cwd.startswith(root) for root in roots) and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def stack_settings():
    # world-searchable: PostgreSQL runs as an unprivileged user when we are root
    root = Path(tempfile.mkdtemp(prefix="ragstream-devstack-", dir="/tmp"))
    root.chmod(0o755)
    base = _free_port_block(N_PORTS)
    settings = Settings(
        data_dir=root / "data",
        kafka_bootstrap=f"127.0.0.1:{base}",
        pg_port=base + 1,
        pg_dsn=f"postgresql://ragstream@127.0.0.1:{base + 1}/ragstream",
        milvus_uri=f"http://127.0.0.1:{base + 2}",
        s3_endpoint=f"http://127.0.0.1:{base + 3}",
        triton_http_port=base + 12,
        triton_grpc_port=base + 13,
        triton_metrics_port=base + 14,
        converter_port=base + 15,
    )
    yield settings
    try:
        devstack.down(settings, grace_s=5)
    finally:
        if not os.environ.get("RAGSTREAM_KEEP_TEST_DIR"):
            shutil.rmtree(root, ignore_errors=True)


async def _kafka_round_trip(settings: Settings) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("devstack-test", num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
    await producer.start()
    try:
        meta = await producer.send_and_wait("devstack-test", b"hello", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition("devstack-test", 0)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        msg = await asyncio.wait_for(consumer.getone(), 20)
    finally:
        await consumer.stop()
    assert (msg.key, msg.value) == (b"k", b"hello")


async def _s3_round_trip(settings: Settings) -> None:
    async with devstack_s3_client(settings) as s3:
        names = {b["Name"] for b in (await s3.list_buckets())["Buckets"]}
        assert settings.bucket in names  # created by up()
        await s3.put_object(Bucket=settings.bucket, Key="t/obj.txt", Body=b"payload")
        got = await s3.get_object(Bucket=settings.bucket, Key="t/obj.txt")
        assert await got["Body"].read() == b"payload"


def devstack_s3_client(settings: Settings):
    from devstack.s3 import s3_client

    return s3_client(settings)


async def _s3_rejects_bad_signature(settings: Settings) -> None:
    bad = settings.model_copy(update={"s3_secret_key": "wrong-secret"})
    with pytest.raises(Exception, match="SignatureDoesNotMatch|AccessDenied|InvalidAccessKeyId"):
        async with devstack_s3_client(bad) as s3:
            await s3.list_buckets()


async def _pg_round_trip(settings: Settings) -> None:
    import asyncpg

    conn = await asyncpg.connect(settings.pg_dsn)
    try:
        await conn.execute("create table t (id int primary key, v text)")
        await conn.execute("insert into t values (1, 'one')")
        assert await conn.fetchval("select v from t where id = 1") == "one"
        assert await conn.fetchval("select current_user") == "ragstream"
    finally:
        await conn.close()


def _milvus_round_trip(settings: Settings) -> None:
    from pymilvus import MilvusClient

    from adapters.vector_store import GRPC_OPTIONS

    # dedicated, with the keepalive the server accepts: pymilvus's shared default
    # channel pings every 10 s and gets GOAWAY too_many_pings (adapters/vector_store.py)
    client = MilvusClient(uri=settings.milvus_uri, timeout=30, dedicated=True,
                          grpc_options=dict(GRPC_OPTIONS))
    try:
        client.create_collection("devstack_test", dimension=4, metric_type="COSINE")
        client.insert("devstack_test", [{"id": i, "vector": [float(i == j) for j in range(4)]} for i in range(4)])
        hits = client.search("devstack_test", data=[[0.0, 0.0, 1.0, 0.0]], limit=1)
        assert hits[0][0]["id"] == 2
        assert client.query("devstack_test", filter="id >= 0", output_fields=["id"]) is not None
    finally:
        client.close()


async def test_devstack_up_round_trips_down(stack_settings: Settings) -> None:
    settings = stack_settings
    t0 = time.monotonic()
    started = await devstack.up_async(settings, timeout_s=180)
    print(f"devstack up took {time.monotonic() - t0:.1f}s")
    # the warm converter runs only with the converter sandbox off (devstack/converter.py)
    warm = {"converter"} if devstack.converter.enabled(settings) else set()
    assert set(started) == {"s3", "broker", "postgres", "milvus", "triton"} | warm
    assert all(st.healthy and st.pid and st.detail == "started" for st in started.values())
    for name in started:
        assert (settings.data_dir / "logs" / f"{name}.log").exists()
        assert (settings.data_dir / "run" / f"{name}.pid").exists()

    health = await devstack.status_async(settings)
    assert all(st.healthy for st in health.values()), health

    await _kafka_round_trip(settings)
    await _s3_round_trip(settings)
    await _s3_rejects_bad_signature(settings)
    await ensure_bucket(settings, settings.bucket)  # idempotent
    await _pg_round_trip(settings)
    await asyncio.to_thread(_milvus_round_trip, settings)

    # idempotent: a second up leaves the running processes alone
    again = await devstack.up_async(settings, timeout_s=60)
    assert {n: s.pid for n, s in again.items()} == {n: s.pid for n, s in started.items()}
    assert all(s.detail == "already running" for s in again.values())

    pids = _stack_pids(settings)
    assert set(st.pid for st in started.values()) <= set(pids)

    outcomes = await asyncio.to_thread(devstack.down, settings)
    cut_off = {name: outcome for name, outcome in outcomes.items() if outcome != "stopped"}
    assert not cut_off, f"not stopped gracefully: {cut_off} (all: {outcomes})"  # a str: never truncated
    assert _stack_pids(settings) == []
    assert not [pid for pid in pids if devstack.alive(pid)]
    assert not list((settings.data_dir / "run").glob("*.pid"))

    after = await devstack.status_async(settings)
    assert not any(st.healthy for st in after.values())
    assert devstack.down(settings) == {n: "not running" for n in started}


async def test_stale_pid_file_is_cleaned(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, milvus_uri=f"http://127.0.0.1:{_free_port_block(1)}")
    paths = devstack.Paths.of(settings, "milvus")
    paths.run_dir.mkdir(parents=True)
    paths.pid.write_text(f"{os.getpid()}\n")  # alive, but not a milvus started from this data_dir
    st = (await devstack.status_async(settings, names=["milvus"]))["milvus"]
    assert not st.healthy and st.pid is None
    assert not paths.pid.exists()


async def test_durable_broker_keeps_records_across_restart() -> None:
    root = Path(tempfile.mkdtemp(prefix="ragstream-devstack-", dir="/tmp"))
    base = _free_port_block(N_PORTS)
    settings = Settings(
        data_dir=root,
        kafka_bootstrap=f"127.0.0.1:{base}",
        s3_endpoint=f"http://127.0.0.1:{base + 3}",
        broker_storage="s3://tansu-test/",
    )
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    try:
        await devstack.up_async(settings, names=["broker", "s3"], timeout_s=120)
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic("durable", num_partitions=1, replication_factor=1)])
        await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
        await producer.start()
        await producer.send_and_wait("durable", b"survives")
        await producer.stop()

        assert await asyncio.to_thread(devstack.down, settings, names=["broker"]) == {"broker": "stopped"}
        restarted = await devstack.up_async(settings, names=["broker", "s3"], timeout_s=60)
        assert restarted["broker"].detail == "started" and restarted["s3"].detail == "already running"

        consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
        await consumer.start()
        tp = TopicPartition("durable", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        msg = await asyncio.wait_for(consumer.getone(), 20)
        await consumer.stop()
        assert msg.value == b"survives"
    finally:
        await asyncio.to_thread(devstack.down, settings, grace_s=5)
        shutil.rmtree(root, ignore_errors=True)


def _volume_ids(s3_data: Path) -> list[int]:
    """SeaweedFS volume ids from the volume files ``{id}.dat`` / ``{collection}_{id}.dat``."""
    return sorted(int(f.stem.rsplit("_", 1)[-1]) for f in s3_data.glob("*.dat"))


async def test_s3_restarted_keeps_objects_and_volume_ids() -> None:
    """The embedded S3 started three times on one data dir: every object written
    before a restart is read after it, and a new bucket's volume gets an id no other
    volume has (the master's Raft state and volume ids: devstack/supervisor.py,
    the quirk on the master's idle cost)."""
    root = Path(tempfile.mkdtemp(prefix="ragstream-devstack-", dir="/tmp"))
    base = _free_port_block(N_PORTS)
    settings = Settings(data_dir=root, s3_endpoint=f"http://127.0.0.1:{base + 3}")
    s3_data = devstack.Paths.of(settings, "s3").data
    try:
        for start in range(3):  # a fresh start, then two with the state of the earlier ones
            started = await devstack.up_async(settings, names=["s3"], timeout_s=120)
            assert started["s3"].detail == "started"
            async with devstack_s3_client(settings) as s3:
                await s3.create_bucket(Bucket=f"restart-{start}")
                await s3.put_object(Bucket=f"restart-{start}", Key="k", Body=f"body {start}".encode())
                for earlier in range(start + 1):
                    got = await s3.get_object(Bucket=f"restart-{earlier}", Key="k")
                    assert await got["Body"].read() == f"body {earlier}".encode()
            ids = _volume_ids(s3_data)
            assert len(ids) == len(set(ids)), f"a volume id was given twice: {ids}"
            assert await asyncio.to_thread(devstack.down, settings, names=["s3"]) == {"s3": "stopped"}
        assert len(_volume_ids(s3_data)) >= 4  # the settings bucket's and three restart-* volumes
    finally:
        await asyncio.to_thread(devstack.down, settings, grace_s=5)
        shutil.rmtree(root, ignore_errors=True)


async def test_start_failures_name_the_service_and_log(tmp_path: Path) -> None:
    port = _free_port_block(1)
    settings = Settings(data_dir=tmp_path)

    async def never_healthy(settings: Settings) -> None:
        raise ConnectionRefusedError("nothing listening")

    crashing = devstack.Service(
        name="crasher",
        command=lambda s, p: ["sh", "-c", "echo boom-from-crasher; exit 3"],
        health=never_healthy,
        ports=lambda s: [port],
        endpoint=lambda s: f"127.0.0.1:{port}",
    )
    devstack.register(crashing)
    try:
        with pytest.raises(devstack.DevStackError, match=r"(?s)crasher: process \d+ exited.*crasher\.log.*boom-from-crasher"):
            await devstack.up_async(settings, names=["crasher"], timeout_s=20)

        # something else holds the port: refuse to start, naming the port
        with socket.socket() as blocker:
            blocker.bind(("127.0.0.1", port))
            blocker.listen()
            with pytest.raises(devstack.DevStackError, match=rf"crasher: port\(s\) \[{port}\] already in use"):
                await devstack.up_async(settings, names=["crasher"], timeout_s=20)
    finally:
        devstack.unregister("crasher")
    assert "crasher" not in {s.name for s in devstack.services()}


def _deny_by_acl(directory: Path, user: str) -> None:
    """Give ``directory`` a POSIX access ACL that denies ``user`` everything while its
    mode bits still read 0755 (the kernel's xattr format: version 2, then entries of
    tag u16, perm u16, id u32; no setfacl needed)."""
    import pwd
    import struct

    uid = pwd.getpwnam(user).pw_uid
    entry = lambda tag, perm, id_=0xFFFFFFFF: struct.pack("<HHI", tag, perm, id_)  # noqa: E731
    acl = (struct.pack("<I", 2) + entry(0x01, 7) + entry(0x02, 0, uid) + entry(0x04, 5)
           + entry(0x10, 5) + entry(0x20, 5))
    os.setxattr(directory, "system.posix_acl_access", acl)


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL changes user only when started as root")
async def test_postgres_moves_out_when_its_user_cannot_write_what_mode_bits_allow() -> None:
    """CI once failed every stack test with "postgres ... cannot reach
    /check/work/main/.ragstream-test/postgres": the parents' mode bits allowed the
    server's user in, yet its write probe failed there.  Reproduced with an ACL that
    denies that user while the bits say 0755: the data moves outside data_dir (the
    same home as for a private parent), linked from data_dir/postgres, and a
    restart finds it again."""
    import asyncpg

    from devstack import postgres as pg

    parent = Path(tempfile.mkdtemp(prefix="ragstream-acl-", dir="/tmp"))
    parent.chmod(0o755)
    _deny_by_acl(parent, pg._pg_user())
    port = _free_port_block(1)
    settings = Settings(data_dir=parent / "data", pg_port=port,
                        pg_dsn=f"postgresql://ragstream@127.0.0.1:{port}/ragstream")
    link = settings.data_dir / "postgres"
    home = pg._outside_home(link)
    try:
        assert devstack.Paths.of(settings, "postgres").data == link  # the bits say: reachable
        await devstack.up_async(settings, names=["postgres"], timeout_s=60)
        assert link.is_symlink() and link.resolve() == home
        assert devstack.Paths.of(settings, "postgres").data == home
        conn = await asyncpg.connect(settings.pg_dsn)
        await conn.execute("create table kept (x int)")
        await conn.close()
        await asyncio.to_thread(devstack.down, settings, names=["postgres"], grace_s=5)
        await devstack.up_async(settings, names=["postgres"], timeout_s=60)
        conn = await asyncpg.connect(settings.pg_dsn)
        assert await conn.fetchval("select to_regclass('kept') is not null")
        await conn.close()
    finally:
        await asyncio.to_thread(devstack.down, settings, grace_s=5)
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL changes user only when started as root")
async def test_postgres_runs_when_data_dir_is_under_a_private_directory() -> None:
    """A CI checkout under a 0700 directory (seen: /check/work/main): the server's
    user cannot reach data_dir, so its data lives outside, linked from data_dir; a
    data_dir removed and made again starts from an empty database."""
    import asyncpg

    private = Path(tempfile.mkdtemp(prefix="ragstream-private-", dir="/tmp"))  # 0700
    port = _free_port_block(1)
    settings = Settings(data_dir=private / "work" / "data", pg_port=port,
                        pg_dsn=f"postgresql://ragstream@127.0.0.1:{port}/ragstream")
    link = settings.data_dir / "postgres"
    try:
        await devstack.up_async(settings, names=["postgres"], timeout_s=60)
        home = devstack.Paths.of(settings, "postgres").data
        assert home.parent == devstack.postgres.OUTSIDE_ROOT and link.resolve() == home
        conn = await asyncpg.connect(settings.pg_dsn)
        await conn.execute("create table kept (x int)")
        await conn.close()

        await asyncio.to_thread(devstack.down, settings, names=["postgres"], grace_s=5)
        await devstack.up_async(settings, names=["postgres"], timeout_s=60)  # a restart keeps data
        conn = await asyncpg.connect(settings.pg_dsn)
        assert await conn.fetchval("select to_regclass('kept') is not null")
        await conn.close()

        await asyncio.to_thread(devstack.down, settings, names=["postgres"], grace_s=5)
        shutil.rmtree(settings.data_dir)
        await devstack.up_async(settings, names=["postgres"], timeout_s=60)  # a new data_dir: empty
        conn = await asyncpg.connect(settings.pg_dsn)
        assert not await conn.fetchval("select to_regclass('kept') is not null")
        await conn.close()
    finally:
        await asyncio.to_thread(devstack.down, settings, grace_s=5)
        home = devstack.Paths.of(settings, "postgres").data
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


def _initdb_wrapper(directory: Path, crashes: int) -> Path:
    """An ``initdb`` stand-in that kills itself with SIGSEGV on its first ``crashes``
    runs (counted in a file beside it), then runs the real one with the same arguments."""
    real = devstack.postgres._pg_bin("initdb")
    script = directory / "initdb"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {directory}/runs 2>/dev/null || echo 0); echo $((n + 1)) > {directory}/runs\n"
        f"env > {directory}/env\n"
        f"if [ \"$n\" -lt {crashes} ]; then echo 'initdb stand-in: crashing'; kill -SEGV $$; fi\n"
        f"exec {real} \"$@\"\n")
    script.chmod(0o755)
    for name, text in (("runs", "0"), ("env", "")):
        (directory / name).write_text(text)
        (directory / name).chmod(0o666)
    return script


@pytest.mark.parametrize("crashes", [1, 2])
async def test_initdb_killed_by_a_signal_runs_once_more_then_names_the_signal(monkeypatch, crashes: int) -> None:
    """Stop 41's CI run: initdb exited -11 (SIGSEGV) and the error said only 'exit -11'.
    A crash wipes the half-made cluster and initdb runs once more; a second crash
    fails the start naming the signal, with the log's last lines in the message."""
    work = Path(tempfile.mkdtemp(prefix="ragstream-initdb-", dir="/tmp"))
    work.chmod(0o755)  # the server's user runs the stand-in and counts its runs here
    wrapper = _initdb_wrapper(work, crashes)
    real_bin = devstack.postgres._pg_bin
    monkeypatch.setattr(devstack.postgres, "_pg_bin", lambda name: str(wrapper) if name == "initdb" else real_bin(name))
    monkeypatch.setenv("PGDATA", "/nonexistent")  # this process's environment stays here
    settings = Settings(data_dir=work / "data")
    paths = devstack.Paths.of(settings, "postgres")
    paths.data.mkdir(parents=True)
    paths.log.parent.mkdir(parents=True, exist_ok=True)
    try:
        if crashes == 1:
            await devstack.postgres._pg_prepare(settings, paths)
            assert (paths.data / "PG_VERSION").exists()
            assert "ragstream: initdb killed by signal 11 (SIGSEGV)" in paths.log.read_text()
        else:
            with pytest.raises(devstack.DevStackError,
                               match=r"(?s)initdb failed \(signal 11 \(SIGSEGV\)\).*initdb stand-in: crashing"):
                await devstack.postgres._pg_prepare(settings, paths)
        assert (work / "runs").read_text().strip() == "2"  # the crash(es) and the one more run
        env = dict(line.split("=", 1) for line in (work / "env").read_text().splitlines() if "=" in line)
        assert "PGDATA" not in env and env["LC_ALL"] == "C"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_free_ports_honour_the_process_range_and_the_reserved_ports(monkeypatch):
    """devstack/ports.py: the range from RAGSTREAM_FREE_PORTS (each part of make test
    has its own) and no reserved port (the test stack's fixed ones), offsets included."""
    from devstack.ports import free_port_block, port_range, reserved_ports

    monkeypatch.setenv("RAGSTREAM_FREE_PORTS", "17000-17040")
    monkeypatch.setenv("RAGSTREAM_RESERVED_PORTS", "17000-17019,27025")
    assert port_range() == (17000, 17040) and 17005 in reserved_ports() and 27025 in reserved_ports()
    for _ in range(30):
        base = free_port_block(3, extra_offsets=(10000,))
        assert 17020 <= base and base + 2 < 17040 and base + 10000 != 27025
    monkeypatch.setenv("RAGSTREAM_FREE_PORTS", "17000")
    with pytest.raises(ValueError, match="one lo-hi range"):
        port_range()
    monkeypatch.setenv("RAGSTREAM_RESERVED_PORTS", "x-2")
    with pytest.raises(ValueError, match="RAGSTREAM_RESERVED_PORTS"):
        reserved_ports()
