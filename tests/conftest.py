"""Test fixtures: a test stack of its own (ports 2xxxx, data in .ragstream-test) and an
all-stages worker, started once per session and stopped at the end.

The environment is set before any ragstream module reads its settings, so every
client in the tests (and the worker subprocess) talks to the test stack.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_ENV = {
    "RAGSTREAM_DATA_DIR": str(ROOT / ".ragstream-test"),
    "RAGSTREAM_KAFKA_BOOTSTRAP": "127.0.0.1:29092",
    # + 8 ports and +10008 (31341): clear of the dev stack, and every fixed port here is
    # below Linux's ephemeral range (32768+), where an outgoing connection can hold it
    "RAGSTREAM_S3_ENDPOINT": "http://127.0.0.1:21333",
    "RAGSTREAM_PG_PORT": "25432",
    "RAGSTREAM_PG_DSN": "postgresql://ragstream@127.0.0.1:25432/ragstream",
    "RAGSTREAM_MILVUS_URI": "http://127.0.0.1:29530",
    "RAGSTREAM_TRITON_HTTP_PORT": "28000",
    "RAGSTREAM_TRITON_GRPC_PORT": "28001",
    "RAGSTREAM_TRITON_METRICS_PORT": "28002",
    "RAGSTREAM_CONVERTER_PORT": "22003",  # + 22004 (its LibreOffice UNO socket)
    # callbacks to the tests' loopback receivers, retried quickly; here and not where a
    # test imports its helpers, so the session worker has them whichever test starts it
    "RAGSTREAM_CALLBACK_ALLOW_HOSTS": "localhost",
    "RAGSTREAM_CALLBACK_BACKOFF_S": "0.3",
    "RAGSTREAM_CALLBACK_BACKOFF_MAX_S": "5",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
for _k, _v in TEST_ENV.items():
    os.environ.setdefault(_k, _v)


def _stack_ports() -> str:
    """The test stack's fixed ports as ``RAGSTREAM_RESERVED_PORTS`` text: broker, S3
    (port .. port+8 and port+10008, SeaweedFS), PostgreSQL, Milvus, Triton's three, the
    converter's two, the session worker's metrics.  Reserved so that no private service
    of a test takes one (devstack/ports.py) before the session stack has bound it: the
    two parts of scripts/test.sh start at the same time."""
    from urllib.parse import urlparse

    env = os.environ
    s3 = urlparse(env["RAGSTREAM_S3_ENDPOINT"]).port
    conv = int(env["RAGSTREAM_CONVERTER_PORT"])
    ports = [f"{s3}-{s3 + 8}", str(s3 + 10008), f"{conv}-{conv + 1}"]
    ports += [env["RAGSTREAM_KAFKA_BOOTSTRAP"].rsplit(":", 1)[1], env["RAGSTREAM_PG_PORT"],
              str(urlparse(env["RAGSTREAM_MILVUS_URI"]).port),
              *(env[f"RAGSTREAM_TRITON_{k}_PORT"] for k in ("HTTP", "GRPC", "METRICS")),
              env.get("RAGSTREAM_TEST_WORKER_METRICS_PORT", "29100")]
    return ",".join(ports)


os.environ.setdefault("RAGSTREAM_RESERVED_PORTS", _stack_ports())

from devstack.ports import free_port_block  # noqa: E402,F401  (after the environment; tests import it from here)

TRACE_FILE = "traces.jsonl"  # the session worker's spans, in .ragstream-test/logs
WORKER_METRICS_PORT = int(os.environ.get("RAGSTREAM_TEST_WORKER_METRICS_PORT", "29100"))
# the shared corpus: beside the checkout (as in CI), or wherever RAGSTREAM_CORPUS says
CORPUS = Path(os.environ.get("RAGSTREAM_CORPUS", ROOT.parent / "shared" / "corpus"))
OUTPUT = ROOT / "test-output"


def run(coro):
    """Run a coroutine to completion from a sync test."""
    return asyncio.run(coro)


@pytest.fixture(scope="session")
def settings():
    from streams.settings import get_settings

    return get_settings()


@pytest.fixture(scope="session")
def stack(settings):
    """The embedded stack on the test ports, fresh for the session."""
    import devstack
    from topics.admin import ensure_topics

    devstack.down(settings)
    shutil.rmtree(settings.data_dir, ignore_errors=True)
    try:
        devstack.up(settings, timeout_s=180)
        run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
        yield settings
    finally:
        if not os.environ.get("RAGSTREAM_KEEP_STACK"):
            devstack.down(settings)


@pytest.fixture(scope="session")
def worker(stack):
    """One all-stages worker process for the session (log: .ragstream-test/logs)."""
    from devstack.worker_process import start_worker, stop_worker

    proc = start_worker(stack.data_dir / "logs" / "worker.log",
                        env={"RAGSTREAM_METRICS_PORT": str(WORKER_METRICS_PORT),
                             # tests/test_delivery.py: the upload-outbox sweep acts fast
                             "RAGSTREAM_UPLOAD_SWEEP_AFTER_S": "10",
                             "RAGSTREAM_UPLOAD_SWEEP_INTERVAL_S": "3",
                             # the suite's worker logs JSON lines (tests/test_log_format.py)
                             "RAGSTREAM_LOG_FORMAT": "json",
                             # and writes its spans to a file (tests/test_tracing.py)
                             "RAGSTREAM_TRACING": "file",
                             "RAGSTREAM_TRACE_FILE": str(stack.data_dir / "logs" / TRACE_FILE)})
    time.sleep(2)
    assert proc.poll() is None, "worker exited at start; see .ragstream-test/logs/worker.log"
    yield proc
    stop_worker(proc)


def suite_part(item) -> str:
    """Which of the two side-by-side pytest processes of ``scripts/test.sh`` runs
    ``item``: ``"unit"`` for a test that is neither marked ``integration`` nor ``slow``
    and uses neither the session ``stack`` nor the session ``settings`` (the test
    stack's addresses: tests/test_migrations.py starts and stops that PostgreSQL
    through them), directly or through another fixture (``fixturenames`` is the
    closure), or is marked ``own_stack`` (it starts the services it needs itself, on
    free ports and a data dir of its own, and uses neither fixture);
    ``"stack"`` for every other test.  Decided from the test itself, so a new test
    lands in the right part without a list."""
    uses = set(getattr(item, "fixturenames", ()))
    if uses & {"stack", "settings"}:
        return "stack"
    if item.get_closest_marker("own_stack"):
        return "unit"  # services of its own on free ports of the unit part's range
    if item.get_closest_marker("integration") or item.get_closest_marker("slow"):
        return "stack"
    return "unit"


def pytest_collection_modifyitems(config, items):
    """With ``RAGSTREAM_TEST_PART`` (``unit`` or ``stack``, set by scripts/test.sh)
    only that part's tests are kept (:func:`suite_part`); the others are reported as
    deselected.

    Tests marked ``drill`` run last: they stop the session worker (the drills start
    workers of their own in the same per-stage consumer groups).  Of those, the ones
    marked ``group_churn`` (the autoscale drill) run at the very end, so that a
    group it might wedge cannot spoil the other drills.  The wedge seen after it
    (README, broker quirk 7) was quirk 9, a LeaveGroup during a rebalance, which
    the stage apps no longer send; the order stays as a guard."""
    part = os.environ.get("RAGSTREAM_TEST_PART", "")
    if part:
        if part not in ("unit", "stack"):
            raise pytest.UsageError(f"RAGSTREAM_TEST_PART={part!r}: expected 'unit' or 'stack'")
        other = [item for item in items if suite_part(item) != part]
        if other:
            config.hook.pytest_deselected(items=other)
            items[:] = [item for item in items if suite_part(item) == part]
    items.sort(key=lambda item: (item.get_closest_marker("drill") is not None,
                                 item.get_closest_marker("group_churn") is not None))


@pytest.fixture(scope="module")
def api(stack, worker):
    """The HTTP API as a uvicorn subprocess on a free port, for the module using it."""
    from api_helpers import api_server, stop_api_server

    server = api_server(stack.data_dir)
    yield server
    stop_api_server()


@pytest.fixture
def project() -> str:
    """A fresh project (its own Milvus collection) per test."""
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def output_dir() -> Path:
    OUTPUT.mkdir(exist_ok=True)
    return OUTPUT


def ingest(paths, project, **kw):
    """Ingest files on the test stack and follow them to terminal states."""
    from rich.console import Console

    from cli.progress import ingest_and_follow

    kw.setdefault("timeout_s", 600)
    return run(ingest_and_follow([Path(p) for p in paths], project=project, category="default",
                                 console=Console(width=160), **kw))


def ingest_texts(folder: Path, docs: dict, project: str):
    """Write ``{file name: text}`` into ``folder``, ingest them all and assert each
    COMPLETED; returns the ingest outcome."""
    for name, text in docs.items():
        (folder / name).write_text(text)
    outcome = ingest(sorted(folder / name for name in docs), project)
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}, outcome.last
    return outcome


@pytest.fixture(autouse=True)
def _pil_pixel_limit():
    """``stages.partition`` sets PIL's process-wide ``Image.MAX_IMAGE_PIXELS`` from
    ``RAGSTREAM_MAX_IMAGE_PIXELS`` on every call (the worker's processes always go
    through it); a test that lowers the variable would leave the lowered global
    behind for every later test in this process (CI: test_image_frames' 50,000-pixel
    limit made reportlab's sample images fail in test_legacy_office and
    test_ocr_agent).  Restored after each test."""
    from PIL import Image

    saved = Image.MAX_IMAGE_PIXELS
    yield
    Image.MAX_IMAGE_PIXELS = saved
