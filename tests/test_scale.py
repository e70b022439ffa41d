"""A 300-page PDF split into ≥ 10 page ranges, partitioned by two partition worker
processes (their own consumer group), on a private stack so no other worker of the
session takes part.  Memory per partition worker (PSS of the worker and its parse
processes, :func:`bench.scale.tree_pss_mb`) stays under 2 GiB and every chunk keeps
its true page number."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _ports() -> dict[str, int]:
    """Free ports for the private stack, below Linux's ephemeral range (32768+), where
    a fixed port could be held by any outgoing connection's local end (seen: Milvus
    "Failed to bind to address 127.0.0.1:59530").  S3 uses its port .. port+8 and
    port+10008 (SeaweedFS)."""
    from tests.conftest import free_port_block

    base = free_port_block(12, extra_offsets=(3 + 10008,))
    return {"kafka": base, "pg": base + 1, "milvus": base + 2, "s3": base + 3}


@pytest.fixture(scope="module")
def private_stack():
    import devstack
    from streams.settings import Settings
    from topics.admin import ensure_topics

    PORTS = _ports()
    data = Path(tempfile.mkdtemp(prefix="ragstream-scale-stack-"))
    data.chmod(0o755)  # PostgreSQL runs as its own user and must reach its data dir
    env = {
        "RAGSTREAM_DATA_DIR": str(data),
        "RAGSTREAM_KAFKA_BOOTSTRAP": f"127.0.0.1:{PORTS['kafka']}",
        "RAGSTREAM_S3_ENDPOINT": f"http://127.0.0.1:{PORTS['s3']}",
        "RAGSTREAM_PG_PORT": str(PORTS["pg"]),
        "RAGSTREAM_PG_DSN": f"postgresql://ragstream@127.0.0.1:{PORTS['pg']}/ragstream",
        "RAGSTREAM_MILVUS_URI": f"http://127.0.0.1:{PORTS['milvus']}",
        "RAGSTREAM_EMBEDDER": "onnx",
    }
    settings = Settings(data_dir=data, kafka_bootstrap=env["RAGSTREAM_KAFKA_BOOTSTRAP"],
                        s3_endpoint=env["RAGSTREAM_S3_ENDPOINT"], pg_port=PORTS["pg"],
                        pg_dsn=env["RAGSTREAM_PG_DSN"], milvus_uri=env["RAGSTREAM_MILVUS_URI"],
                        embedder="onnx")
    names = ["broker", "s3", "postgres", "milvus"]
    try:
        devstack.up(settings, names=names, timeout_s=180)
        asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
        yield settings, env
    finally:  # also when up() fails half-way: stop what it started
        devstack.down(settings, names=names)
        shutil.rmtree(data, ignore_errors=True)


def test_300_page_pdf_in_page_ranges_across_two_partition_workers(private_stack, output_dir):
    from bench.scale import page_mismatches, run_scale

    settings, env = private_stack
    res = run_scale(settings, env, pages=300, partition_workers=2)
    report = (f"status={res.status} seconds={res.seconds:.1f} parts={res.parts} "
              f"by_worker={dict(res.parts_by_worker)} peak_pss_mb={res.peak_pss_mb}")
    (output_dir / "scale.txt").write_text(report + "\n")
    print(report)
    assert res.status == "COMPLETED"
    assert res.parts >= 10
    assert len(res.parts_by_worker) == 2, res.parts_by_worker
    assert all(mb < 2048 for mb in res.peak_pss_mb.values()), res.peak_pss_mb
    # every page's elements carry their true page number, across all ranges
    assert {e["metadata"]["page_number"] for e in res.elements} == set(range(1, 301))
    assert not page_mismatches(res.elements)
    assert len(res.chunks) >= 30 and not page_mismatches(res.chunks, exact=False)
    assert [c["page_number"] for c in res.chunks] == sorted(c["page_number"] for c in res.chunks)
