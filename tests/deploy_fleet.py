"""The ragstream containers of docker-compose.yml and deploy/k8s (tests/deploy_specs.py)
run as processes next to the test stack (tests/test_compose_exercised.py).

:func:`plan` turns a container into a process: its command line and environment as
given, with only :data:`the rewrite table <REWRITES>` applied — the addresses of the
services the test stack stands in for, the credentials that stack knows, listening
addresses and ports (every container has its own network namespace; here they share
one loopback), and the paths that exist only in the image.  :func:`preflight` reads
each process's settings the way the process will, and refuses to start anything that
would talk to an address other than the test stack's (a misnamed variable falls back
to a default, and the defaults are the development stack's loopback ports, which on a
shared machine may be someone else's).  :class:`Fleet` starts the processes (each in
its own process group), waits until each is ready — a one-shot exited 0, a worker
printed ``ragstream worker: <stage> ready``, every probe and scrape answers — and
stops them, by their own process groups only.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from deploy_specs import Probe, ServiceSpec

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
READY_MARK = re.compile(r"ragstream worker: (\w+) ready")  # drills/faults.READY_MARK, as text

# ---------------------------------------------------------------- the rewrite table
# Everything that differs between a container and a process here; nothing else of a
# container's command line or environment is changed.
#
# * service addresses (host:port as compose and Kubernetes write them) -> the test
#   stack on 127.0.0.1 (service_addresses): Kafka, MinIO, PostgreSQL, Milvus, Triton.
# * credentials, where the files' differ from the test stack's: the S3 key pair (the
#   test stack's SeaweedFS knows one pair, settings.s3_access_key/s3_secret_key; the
#   k8s Secret holds the placeholder "change-me").  Kept as given: the PostgreSQL
#   password in the DSN (the test stack's PostgreSQL trusts loopback connections),
#   Kafka SASL and the Milvus token (empty in both files; PLAINTEXT).
# * listening: 0.0.0.0 -> 127.0.0.1 (RAGSTREAM_*_HOST, --host), and each container
#   port a process listens on (RAGSTREAM_METRICS_PORT, RAGSTREAM_API_PORT, --port) ->
#   a free loopback port of its own; probes, scrapes and published ports reach it
#   through the same map, as a Service's targetPort or compose's publishing would.
# * image paths: IMAGE_PATHS below; the image's WORKDIR and every volume mount (the
#   pods' emptyDir at /data), and RAGSTREAM_DATA_DIR where it names the container's
#   own filesystem (a Job has no volume) -> an empty folder of the process's own.
# * RAGSTREAM_BROKER_QUIRKS: both files say "false" because they run Apache Kafka;
#   the test stack's broker is Tansu, which needs them (quirk 9: a LeaveGroup while a
#   group re-forms strands the group for the rest of the session) -> "true".
# * RAGSTREAM_CONVERTER_URL=off added: nothing listens on a container's loopback for
#   the warm Office converter (neither file runs one; normalize converts cold), while
#   here the default 127.0.0.1:12003 may be a development stack's.
# * the image itself: PATH (its /usr/local/bin holds python and the ragstream console
#   script -> this venv's bin, then the system's), LANG (the python base image's),
#   PYTHONPATH passed through (the code under test; the image installs it), HOME
#   passed through (the models and NLTK data the bootstrap put there; the image
#   carries its own).
IMAGE_PATHS = {
    # the Dockerfile's `RUN triton/export_embedder.py --output triton/embedder/1/model.onnx`
    # in WORKDIR /app; the checkout's export of the same model (adapters/embedder.py)
    "/app/triton/embedder/1/model.onnx": ROOT / "triton" / "embedder" / "1" / "model.onnx",
}
LISTEN_HOSTS = ("RAGSTREAM_METRICS_HOST", "RAGSTREAM_API_HOST")
LISTEN_PORTS = ("RAGSTREAM_METRICS_PORT", "RAGSTREAM_API_PORT")
CREDENTIALS = {"RAGSTREAM_S3_ACCESS_KEY": "s3_access_key", "RAGSTREAM_S3_SECRET_KEY": "s3_secret_key"}
TRITON_PORTS = ("RAGSTREAM_TRITON_HTTP_PORT", "RAGSTREAM_TRITON_GRPC_PORT", "RAGSTREAM_TRITON_METRICS_PORT")
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # python:3.11-slim's


def service_addresses(settings) -> dict[str, str]:
    """``host:port`` of each service the test stack replaces, as the files write it ->
    the test stack's ``127.0.0.1:port``."""
    return {
        "kafka:9092": settings.kafka_bootstrap,
        "kafka.ragstream.svc.cluster.local:9092": settings.kafka_bootstrap,  # k8s (config.yaml says why)
        "minio:9000": urlsplit(settings.s3_endpoint).netloc,
        "postgres:5432": f"127.0.0.1:{settings.pg_port}",
        "milvus:19530": urlsplit(settings.milvus_uri).netloc,
        "triton:8000": f"127.0.0.1:{settings.triton_http_port}",
        "triton:8001": f"127.0.0.1:{settings.triton_grpc_port}",
        "triton:8002": f"127.0.0.1:{settings.triton_metrics_port}",
    }


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (tests/api_helpers.free_port)."""
    from api_helpers import free_port as pick

    return pick()


@dataclass
class Launch:
    """A container as a process here: what runs, and what the table changed."""

    spec: ServiceSpec
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    ports: dict[int, int]  # container port -> loopback port
    log: Path
    changed: dict[str, str] = field(default_factory=dict)  # "VAR" or "argv": "given -> here"
    proc: subprocess.Popen | None = None

    def tail(self, chars: int = 2500) -> str:
        """The end of the process's log, for failure messages."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else "(no log)"


def _set(env: dict, changed: dict, name: str, value: str) -> None:
    if env.get(name) != value:
        changed[name] = f"{env.get(name)!r} -> {value!r}"
        env[name] = value


def plan(spec: ServiceSpec, settings, scratch: Path, argv: list[str] | None = None) -> Launch:
    """``spec`` (or its entrypoint with ``argv`` instead of its command) as a process
    here, with the rewrite table applied; its folders under ``scratch``."""
    home = scratch / spec.name.replace("/", "-")
    cwd = home / spec.workdir.strip("/").replace("/", "-")
    cwd.mkdir(parents=True, exist_ok=True)
    env, changed = dict(spec.env), {}
    addresses = service_addresses(settings)
    for name, value in spec.env.items():
        new = value
        for given, here in addresses.items():
            new = re.sub(rf"(?<![\w.-]){re.escape(given)}(?!\d)", here, new)
        if name in LISTEN_HOSTS and value == "0.0.0.0":
            new = "127.0.0.1"
        if value in IMAGE_PATHS:
            new = str(IMAGE_PATHS[value])
        for mount in spec.mounts:
            if value == mount or value.startswith(mount + "/"):
                new = str(home / mount.strip("/")) + value[len(mount):]
        if name == "RAGSTREAM_DATA_DIR" and value.startswith("/") and new == value:  # the container's own layer
            new = str(home / value.strip("/"))
        if new != value and new.startswith(str(home)):
            Path(new).mkdir(parents=True, exist_ok=True)
        _set(env, changed, name, new)
    if env.get("RAGSTREAM_TRITON_HOST") == "triton":
        _set(env, changed, "RAGSTREAM_TRITON_HOST", "127.0.0.1")
        for name in TRITON_PORTS:
            if f"triton:{env.get(name)}" in addresses:
                _set(env, changed, name, addresses[f"triton:{env[name]}"].rpartition(":")[2])
    for name, attr in CREDENTIALS.items():
        if name in env:
            _set(env, changed, name, getattr(settings, attr))
    if "RAGSTREAM_BROKER_QUIRKS" in env:
        _set(env, changed, "RAGSTREAM_BROKER_QUIRKS", "true")
    _set(env, changed, "RAGSTREAM_CONVERTER_URL", "off")
    ports: dict[int, int] = {}
    for name in LISTEN_PORTS:
        if env.get(name, "0") not in ("", "0"):
            ports[int(env[name])] = ports.get(int(env[name])) or free_port()
            _set(env, changed, name, str(ports[int(env[name])]))
    words = list(spec.argv if argv is None else spec.entrypoint + argv)
    given = " ".join(words)
    for i, word in enumerate(words[:-1]):
        if word == "--host" and words[i + 1] == "0.0.0.0":
            words[i + 1] = "127.0.0.1"
        if word == "--port":
            ports[int(words[i + 1])] = ports.get(int(words[i + 1])) or free_port()
            words[i + 1] = str(ports[int(words[i + 1])])
    if words and words[0] == "ragstream":
        words[0] = str(VENV_BIN / "ragstream")  # the image's console script
    if " ".join(words) != given:
        changed["argv"] = f"{given!r} -> {' '.join(words)!r}"
    env.update({"PATH": f"{VENV_BIN}:{BASE_PATH}", "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", str(home))})
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return Launch(spec, words, env, cwd, ports, home / "process.log", changed)


# settings of each process that name a service: they must all be the test stack's
def stack_endpoints(settings) -> dict[str, object]:
    """The test stack's value of each address setting (the PostgreSQL DSN as its
    host, port and database: the user and password may differ)."""
    pg = urlsplit(settings.pg_dsn)
    return {"kafka_bootstrap": settings.kafka_bootstrap, "s3_endpoint": settings.s3_endpoint,
            "pg_dsn": (pg.hostname, pg.port, pg.path), "milvus_uri": settings.milvus_uri,
            "triton_host": "127.0.0.1", "triton_http_port": settings.triton_http_port,
            "triton_grpc_port": settings.triton_grpc_port, "triton_metrics_port": settings.triton_metrics_port}


_READ_SETTINGS = """
import json, os, sys
from streams.settings import Settings
out = []
for env in json.load(sys.stdin):
    os.environ.clear()
    os.environ.update(env)
    try:
        out.append(Settings().model_dump(mode="json"))
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""


def preflight(launches: list[Launch], settings) -> None:
    """Read every launch's settings as its process will (streams.settings, its
    environment only, in one child process) and fail, naming the service, when one
    would not start or would reach an address that is not the test stack's."""
    done = subprocess.run([sys.executable, "-c", _READ_SETTINGS], input=json.dumps([l.env for l in launches]),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    wanted = stack_endpoints(settings)
    problems = []
    for launch, got in zip(launches, json.loads(done.stdout)):
        if "error" in got:
            problems.append(f"{launch.spec.label}: its settings do not load: {got['error']}")
            continue
        pg = urlsplit(got["pg_dsn"])
        got["pg_dsn"] = (pg.hostname, pg.port, pg.path)
        for name, value in wanted.items():
            if got[name] != value:
                var = "RAGSTREAM_" + name.upper()
                problems.append(f"{launch.spec.label}: {name} would be {got[name]!r}, not the test stack's "
                                f"{value!r} ({var} given as {launch.spec.env.get(var, '(not set: the default)')!r}; "
                                "a misnamed variable, or an address the rewrite table does not know)")
        for name, value in launch.env.items():
            if value.startswith("/") and name not in ("PATH", "PYTHONPATH", "HOME") and not Path(value).exists():
                problems.append(f"{launch.spec.label}: {name}={value!r} exists only in the image "
                                "(map it in tests/deploy_fleet.py IMAGE_PATHS)")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- running

class NotReady(AssertionError):
    """A check that has not passed (yet): retried until the fleet's deadline."""


def container_port(launch: Launch, probe: Probe) -> int:
    """The loopback port behind ``probe``'s container port (a number, or the name of
    one of the container's ports); fails at once when nothing would listen there."""
    port = probe.port
    if isinstance(port, str) and not port.isdigit():
        assert port in launch.spec.ports, (f"{launch.spec.label}: {probe.what} names port {port!r}, "
                                           f"which the container does not declare ({launch.spec.ports})")
        port = launch.spec.ports[port]
    assert int(port) in launch.ports, (
        f"{launch.spec.label}: {probe.what} reaches container port {port}, where the process does not "
        f"listen (it listens on {sorted(launch.ports) or 'no port'}: its command line and RAGSTREAM_*_PORT)")
    return launch.ports[int(port)]


def check_probe(launch: Launch, probe: Probe) -> None:
    """Run one probe as kubelet or Docker would; raises :class:`NotReady` when it fails."""
    where = f"{launch.spec.label}: {probe.what}"
    if probe.kind == "exec":
        words = [re.sub(r"\b(localhost|127\.0\.0\.1):(\d+)\b",
                        lambda m: f"127.0.0.1:{launch.ports.get(int(m.group(2)), m.group(2))}", w)
                 for w in probe.command]
        program = shutil.which(words[0], path=launch.env["PATH"]) or words[0]
        try:
            done = subprocess.run([program, *words[1:]], env=launch.env, cwd=launch.cwd, capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NotReady(f"{where} {list(probe.command)}: {exc}") from None
        if done.returncode != 0:
            raise NotReady(f"{where} {list(probe.command)} exited {done.returncode}: {done.stderr[-500:]}")
        return
    port = container_port(launch, probe)
    if probe.kind == "tcp":
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except OSError as exc:
            raise NotReady(f"{where}: container port {probe.port} (here {port}): {exc}") from None
        return
    url = f"http://127.0.0.1:{port}{probe.path}"
    try:
        code = httpx.get(url, timeout=10).status_code
    except httpx.HTTPError as exc:
        raise NotReady(f"{where}: GET {probe.path} on container port {probe.port} (here {url}): {exc!r}") from None
    answer = f"{where}: GET {probe.path} on container port {probe.port} answered {code}"
    assert code not in (404, 405), answer  # the process is up and has no such path: it never will
    if not 200 <= code < 400:  # what kubelet counts as success
        raise NotReady(answer)


def stages_of(argv: list[str]) -> list[str]:
    """The stages a ``ragstream worker`` command line runs ([] for any other command)."""
    from streams.app import STAGES

    if len(argv) < 2 or argv[1] != "worker":
        return []
    chosen = argv[argv.index("--stages") + 1] if "--stages" in argv[:-1] else "all"
    return list(STAGES) if chosen == "all" else [s.strip() for s in chosen.split(",") if s.strip()]


def readiness(launch: Launch) -> None:
    """Raises :class:`NotReady` until ``launch`` is ready, AssertionError when it never will be."""
    proc = launch.proc
    code = proc.poll() if launch.spec.one_shot else proc.returncode
    if launch.spec.one_shot:
        if code is None:
            raise NotReady(f"{launch.spec.label}: still running")
        assert code == 0, f"{launch.spec.label} ({launch.argv[1:]}) exited {code}:\n{launch.tail()}"
        return
    if code is None and _exited(proc):  # its leftovers first, while its pid cannot be reused
        _signal_group(proc.pid, signal.SIGKILL)
        code = proc.wait(10)
    assert code is None, f"{launch.spec.label} ({launch.argv[1:]}) exited {code} at start:\n{launch.tail()}"
    ready = set(READY_MARK.findall(launch.tail(10**7)))
    missing = [s for s in stages_of(launch.argv) if s not in ready]
    if missing:
        raise NotReady(f"{launch.spec.label}: no 'ragstream worker: <stage> ready' for {missing}")
    for probe in launch.spec.probes:
        check_probe(launch, probe)


class Fleet:
    """Processes started from launches, each in its own process group; :meth:`stop`
    ends exactly those groups."""

    def __init__(self) -> None:
        self.launches: list[Launch] = []

    def start(self, launch: Launch) -> Launch:
        """Start ``launch``'s process (its output into ``launch.log``)."""
        with open(launch.log, "ab") as log:
            launch.proc = subprocess.Popen(launch.argv, env=launch.env, cwd=launch.cwd, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        self.launches.append(launch)
        return launch

    def wait_ready(self, launches: list[Launch], timeout_s: float) -> None:
        """Until every launch is ready; fails with what each one still lacks."""
        for launch in launches:  # a probe on a port nothing listens on fails at once
            for probe in launch.spec.probes:
                if probe.kind != "exec":
                    container_port(launch, probe)
        waiting = list(launches)
        deadline = time.monotonic() + timeout_s
        while waiting:
            lacking = {}
            for launch in waiting:
                try:
                    readiness(launch)
                except NotReady as why:
                    lacking[launch.spec.label] = str(why)
            waiting = [l for l in waiting if l.spec.label in lacking]
            if waiting and time.monotonic() > deadline:
                raise AssertionError(f"not ready in {timeout_s:.0f} s:\n" + "\n".join(
                    f"{why}\n--- its log:\n{l.tail(1500)}" for l in waiting for why in [lacking[l.spec.label]]))
            if waiting:
                time.sleep(1)

    def stop(self, grace_s: float = 40.0) -> None:
        """SIGTERM each started process group, then SIGKILL what is left of it after
        ``grace_s`` (pool processes too: the group is the process's own)."""
        for launch in self.launches:
            if launch.proc.returncode is None:
                _signal_group(launch.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for launch in self.launches:
            if launch.proc.returncode is not None:  # reaped already (a one-shot): its group is gone
                continue
            while not _exited(launch.proc) and time.monotonic() < deadline:
                time.sleep(0.2)
            # not reaped yet, so its pid (the group's id) cannot have been reused
            _signal_group(launch.proc.pid, signal.SIGKILL)
            launch.proc.wait(10)
        self.launches = []


def _exited(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` has exited, without reaping it."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
