"""The embedded stack: every process ``ragstream dev up`` starts on loopback, so one
machine runs the whole pipeline from pip-installed parts, without Docker.

Owns:
    supervisor.py      start / health-check / stop services in dependency order, pid
                       files, logs and data under ``{data_dir}``; the service registry
    s3.py              SeaweedFS ``weed mini`` (S3), and the bucket
    broker.py          Tansu (Kafka protocol broker), records in S3 or memory
    postgres.py        the system PostgreSQL in a private data directory
    milvus.py          Milvus Lite in server mode
    triton.py          ``tritonserver`` from ``.venv-triton`` (also ``ragstream triton
                       serve`` in production and the benchmarks)
    converter.py       unoserver (warm LibreOffice) for Office → PDF
    worker_process.py  a ``ragstream worker`` child process (demo, drills, tests)

May import: ``streams.settings`` and ``stages`` (the converter probe); never the
API, the CLI, the agents or the drills.  Each service module registers itself with
the supervisor when imported (:data:`supervisor.SERVICE_MODULES`).

The supervisor's public functions are re-exported here, so callers write
``import devstack; devstack.up(settings)``.
"""
from devstack.supervisor import (LOOPBACK, SERVICE_MODULES, STOP_GRACE_S, DevStackError, Paths,
                                 ProcessExited, Service, ServiceStatus, alive, down,
                                 register, services, status, status_async, unregister,
                                 up, up_async, venv_bin)

__all__ = ["LOOPBACK", "SERVICE_MODULES", "STOP_GRACE_S", "DevStackError", "Paths", "ProcessExited",
           "Service", "ServiceStatus", "alive", "down", "register", "services", "status",
           "status_async", "unregister", "up", "up_async", "venv_bin"]
