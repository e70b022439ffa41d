"""One clear line instead of a traceback when a command cannot reach a service.

A command run while the stack is down (``ragstream status`` after ``ragstream demo``
stopped it, say) used to end in a 150-line traceback whose last line named only
``('127.0.0.1', 15432)``.  :func:`unreachable_message` reads the exception chain of
such a failure, recognises a connection failure of any client we use (asyncpg and
asyncio sockets, aiokafka, pymilvus, botocore, tritonclient, httpx), and names the
service from the settings' endpoints; ``cli/main.py`` prints it and exits 2.  Any
other error keeps its traceback.
"""
from __future__ import annotations

import errno
import re
from typing import Iterator, Optional
from urllib.parse import urlsplit

from streams.settings import Settings

# exception class names (any module) that mean "could not connect"
_CONNECT_CLASSES = {"KafkaConnectionError", "EndpointConnectionError", "ConnectError",
                    "ConnectTimeout", "ConnectTimeoutError", "NodeNotReadyError"}
# words that mark a client's wrapper exception as a connection failure
_CONNECT_WORDS = ("fail connecting", "failed to connect", "connection refused",
                  "connect call failed", "unable to bootstrap", "could not connect")


def service_endpoints(settings: Settings) -> dict[tuple[str, int], str]:
    """``{(host, port): service name}`` for every service the settings point at."""
    def hostport(url: str, default_port: int) -> tuple[str, int]:
        parts = urlsplit(url if "//" in url else f"//{url}")
        return parts.hostname or "127.0.0.1", parts.port or default_port

    endpoints = {hostport(settings.pg_dsn, 5432): "PostgreSQL",
                 hostport(settings.milvus_uri, 19530): "Milvus",
                 hostport(settings.s3_endpoint, 80): "the S3 object store",
                 (settings.triton_host, settings.triton_http_port): "Triton (HTTP)",
                 (settings.triton_host, settings.triton_grpc_port): "Triton (gRPC)",
                 ("127.0.0.1", settings.converter_port): "the Office converter"}
    for server in settings.kafka_bootstrap.split(","):
        endpoints[hostport(server.strip(), 9092)] = "the Kafka broker"
    return endpoints


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.extend([e.__cause__, e.__context__, *getattr(e, "exceptions", ())])


def _is_connect_failure(e: BaseException) -> bool:
    if isinstance(e, ConnectionRefusedError):
        return True
    if isinstance(e, OSError) and e.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH,
                                              errno.ENETUNREACH):
        return True
    if type(e).__name__ in _CONNECT_CLASSES:
        return True
    text = str(e).lower()
    return any(w in text for w in _CONNECT_WORDS)


def _mentions(text: str, host: str, port: int) -> bool:
    """True when ``text`` names ``host``/``port`` as ``host:port`` or ``('host', port``."""
    h = re.escape(host)
    return bool(re.search(rf"{h}:{port}\b", text) or re.search(rf"['\"]{h}['\"],\s*{port}\b", text))


def unreachable_message(exc: BaseException, settings: Settings) -> Optional[str]:
    """The line to print when ``exc`` is a failure to connect to a service, else None.

    The service is named when one of ``settings``' endpoints appears in the chain's
    messages (``host:port`` or ``('host', port)``); otherwise the line says "a
    service" and quotes the client's error."""
    chain = list(_chain(exc))
    failures = [e for e in chain if _is_connect_failure(e)]
    if not failures:
        return None
    text = " ".join(str(e) for e in chain)
    named = [(name, host, port) for (host, port), name in service_endpoints(settings).items()
             if _mentions(text, host, port)]
    if named:
        name, host, port = named[0]
        what = f"{name} at {host}:{port}"
        said = [e for e in failures if _mentions(str(e), host, port)]
    else:
        what, said = "a service", []
    first = (said or failures)[0]
    lines = str(first).strip().splitlines()
    detail = f"{type(first).__name__}: {lines[0] if lines else ''}"[:200]
    return (f"ragstream: cannot reach {what} ({detail}). Is the stack up? "
            "`ragstream dev up` starts the embedded one; `ragstream dev status` shows what runs.")
