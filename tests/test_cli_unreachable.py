"""A command run while the stack is down says which service it cannot reach, in one
line, and exits 2 (cli/unreachable.py).  A newcomer ran ``ragstream status -p demo``
after ``ragstream demo`` had stopped the stack and got a 150-line traceback.
"""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError

from cli.unreachable import service_endpoints, unreachable_message
from streams.settings import Settings

SETTINGS = Settings(pg_dsn="postgresql://ragstream@127.0.0.1:15432/ragstream",
                    milvus_uri="http://127.0.0.1:19530", kafka_bootstrap="127.0.0.1:19092",
                    s3_endpoint="http://127.0.0.1:18333")


def _raised(outer: Exception, inner: BaseException) -> Exception:
    """``outer`` raised from ``inner`` (a real chain, as a client library leaves it)."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except Exception as caught:  # noqa: BLE001
        return caught


class MilvusException(Exception):
    """Stands in for pymilvus's wrapper: only its class name and text matter here."""


def test_endpoints_come_from_the_settings():
    endpoints = service_endpoints(SETTINGS)
    assert endpoints[("127.0.0.1", 15432)] == "PostgreSQL"
    assert endpoints[("127.0.0.1", 19530)] == "Milvus"
    assert endpoints[("127.0.0.1", 19092)] == "the Kafka broker"
    assert endpoints[("127.0.0.1", 18333)] == "the S3 object store"


def test_refused_postgres_connection_is_named():
    exc = _raised(RuntimeError("pool setup failed"),
                  ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('127.0.0.1', 15432)"))
    line = unreachable_message(exc, SETTINGS)
    assert line.startswith("ragstream: cannot reach PostgreSQL at 127.0.0.1:15432 (ConnectionRefusedError")
    assert "ragstream dev up" in line and "\n" not in line


def test_broker_and_milvus_wrappers_are_recognised():
    kafka = KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 19092, <AddressFamily.AF_INET: 2>)]")
    assert "the Kafka broker at 127.0.0.1:19092" in unreachable_message(kafka, SETTINGS)
    milvus = MilvusException("<MilvusException: (code=2, message=Fail connecting to server on "
                             "127.0.0.1:19530, illegal connection params or server unavailable)>")
    assert "Milvus at 127.0.0.1:19530" in unreachable_message(milvus, SETTINGS)


def test_a_port_that_only_starts_like_a_known_one_is_not_named():
    exc = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('127.0.0.1', 154320)")
    assert "cannot reach a service (" in unreachable_message(exc, SETTINGS)


def test_other_errors_keep_their_traceback():
    assert unreachable_message(ValueError("bad page range"), SETTINGS) is None
    assert unreachable_message(_raised(KeyError("x"), FileNotFoundError("a.pdf")), SETTINGS) is None


@pytest.mark.parametrize("command", [["status", "-p", "demo"], ["search", "pump", "-p", "demo"],
                                     ["dlq", "list"], ["requeue", "--dry-run"]])
def test_commands_against_a_stopped_stack_print_one_line(command, tmp_path):
    """The real commands, every service pointed at a loopback port nobody listens on."""
    env = {**os.environ, "RAGSTREAM_DATA_DIR": str(tmp_path),
           "RAGSTREAM_PG_DSN": "postgresql://ragstream@127.0.0.1:9/ragstream", "RAGSTREAM_PG_PORT": "9",
           "RAGSTREAM_MILVUS_URI": "http://127.0.0.1:9", "RAGSTREAM_KAFKA_BOOTSTRAP": "127.0.0.1:9",
           "RAGSTREAM_S3_ENDPOINT": "http://127.0.0.1:9", "RAGSTREAM_BROKER_WAIT_S": "2",
           "RAGSTREAM_MILVUS_RECONNECT_S": "2"}
    proc = subprocess.run([str(Path(sys.executable).with_name("ragstream")), *command],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragstream: cannot reach")]
    assert len(lines) == 1 and "127.0.0.1:9 " in lines[0], proc.stderr[-2000:]


@pytest.mark.parametrize("command", [["reindex", "-p", "demo", "--show"], ["reindex", "-p", "demo", "--rollback"]])
def test_reindex_against_a_stopped_milvus_does_not_retry(command, tmp_path):
    """Found by a newcomer: ``reindex --show`` with the stack down went through the
    vector store's 60 s reconnect window (16 "reconnecting" warnings) before its one
    line.  The default window is kept here on purpose: the command must not use it."""
    env = {**os.environ, "RAGSTREAM_DATA_DIR": str(tmp_path), "RAGSTREAM_MILVUS_URI": "http://127.0.0.1:9"}
    env.pop("RAGSTREAM_MILVUS_RECONNECT_S", None)
    proc = subprocess.run([str(Path(sys.executable).with_name("ragstream")), *command],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "reconnecting" not in proc.stderr and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragstream: cannot reach")]
    assert len(lines) == 1 and "Milvus at 127.0.0.1:9 " in lines[0], proc.stderr[-2000:]
