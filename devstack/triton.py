"""The local Triton Inference Server: layout, launch, readiness, clean stop.

The only tritonserver installable with pip is the one bundled in PyPI
``nvidia-pytriton`` (tritonserver 2.51, Python backend only, numpy<2), so it lives
in its own virtualenv ``.venv-triton`` (``triton/setup_server_env.sh``).  The model
repository is ``triton/`` (CPU configs; ``triton/gpu/`` is the GPU repository).

What it takes to run that binary outside pytriton (found here, 2.51 / Python 3.11):

- ``LD_LIBRARY_PATH`` = the wheel's ``nvidia_pytriton.libs`` + Python's ``LIBDIR``
  (the stub links ``libpython3.11.so``).
- The Python backend directory must hold ``libtriton_python.so`` and a
  ``triton_python_backend_stub`` for the server venv's Python version (the wheel
  ships one per version under ``python_backend_stubs/``): :func:`prepare_backends`
  assembles it under ``.venv-triton/tritonserver-backends/python``.
- The stub starts an isolated interpreter (``PYTHONPATH`` is ignored) whose prefix
  comes from the ``python3`` found on ``PATH``: ``.venv-triton/bin`` goes first on
  ``PATH`` so models import the venv's onnxruntime/tokenizers/numpy<2.
- Stubs are children of tritonserver in its process group.  SIGTERM to
  tritonserver unloads the models and exits in ~3 s, stubs included; if its parent
  dies without forwarding SIGTERM, the server keeps running, so :class:`TritonServer`
  starts it in its own session with ``PR_SET_PDEATHSIG`` and stops the whole group.

Ports (all on 127.0.0.1): ``settings.triton_http_port`` (18000),
``triton_grpc_port`` (18001), ``triton_metrics_port`` (18002).

Entry points: ``python -m devstack.triton serve`` (foreground; Procfile and
``ragstream triton serve``), the ``triton`` dev stack service registered here, and
:class:`TritonServer` for tests and benchmarks.

Size: one launcher for one binary: layout of the pip-installed tritonserver, backends,
model checks, argv/env, the process group and its clean stop, used by the devstack,
`ragstream triton serve` and the benchmarks.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from streams.settings import Settings, get_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VENV = REPO_ROOT / ".venv-triton"
DEFAULT_REPOSITORY = REPO_ROOT / "triton"
SETUP_SCRIPT = REPO_ROOT / "triton" / "setup_server_env.sh"
EMBEDDER_EXPORT = REPO_ROOT / "triton" / "export_embedder.py"
LOOPBACK = "127.0.0.1"
#: models loaded by default (explicit model control; ``triton/gpu`` is never loaded)
DEFAULT_MODELS = ("embedder", "embedder_online", "reranker")
#: Python backend shared memory per model instance: 64 MiB start, 64 MiB growth
#: (256 texts x 384 float32 = 393 KB out; inputs are raw text)
SHM_DEFAULT_BYTES = 64 * 1024 * 1024


class TritonServerError(RuntimeError):
    """The Triton server environment is missing, or the server failed to start/stop."""


@dataclass(frozen=True)
class TritonLayout:
    """Paths of the server environment (all absolute)."""

    venv: Path
    python: Path
    site_packages: Path
    binary: Path
    libs: Path
    backends: Path
    python_libdir: Path

    @classmethod
    def of(cls, venv: Path | None = None) -> "TritonLayout":
        """Locate everything inside ``venv`` (default ``.venv-triton``).  Raises
        :class:`TritonServerError` when the venv or the tritonserver binary is missing."""
        venv = Path(venv or DEFAULT_VENV).resolve()
        python = venv / "bin" / "python3"
        if not python.exists():
            raise TritonServerError(f"{venv} is not a virtualenv: run {SETUP_SCRIPT}")
        site = next(iter(sorted((venv / "lib").glob("python3.*/site-packages"))), None)
        if site is None or not (site / "pytriton" / "tritonserver" / "bin" / "tritonserver").exists():
            raise TritonServerError(f"nvidia-pytriton is not installed in {venv}: run {SETUP_SCRIPT}")
        # LIBDIR of the venv's base interpreter (where libpython3.X.so lives)
        out = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
            capture_output=True, text=True, check=True)
        return cls(
            venv=venv,
            python=python,
            site_packages=site,
            binary=site / "pytriton" / "tritonserver" / "bin" / "tritonserver",
            libs=site / "nvidia_pytriton.libs",
            backends=venv / "tritonserver-backends",
            python_libdir=Path(out.stdout.strip()),
        )


def ensure_server_env(venv: Path | None = None) -> TritonLayout:
    """Create/refresh the server venv with ``triton/setup_server_env.sh`` when it is
    not usable yet (needs PyPI; ~25 s), then return its layout."""
    try:
        return TritonLayout.of(venv)
    except TritonServerError:
        proc = subprocess.run(["bash", str(SETUP_SCRIPT), str(Path(venv or DEFAULT_VENV))],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise TritonServerError(f"{SETUP_SCRIPT} failed:\n{proc.stderr[-3000:]}") from None
        return TritonLayout.of(venv)


def prepare_backends(layout: TritonLayout) -> Path:
    """Assemble ``<venv>/tritonserver-backends/python`` (backend library, utils and the
    stub for the venv's Python version); idempotent.  Returns the backend directory."""
    src = layout.site_packages / "pytriton" / "tritonserver"
    version = layout.site_packages.parent.name.removeprefix("python")  # "3.11"
    stub = src / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.exists():
        raise TritonServerError(f"no Python backend stub for Python {version} in {src}")
    dst = layout.backends / "python"
    dst.mkdir(parents=True, exist_ok=True)
    for f in [*(src / "backends" / "python").iterdir(), stub]:
        if f.is_file():
            target = dst / f.name
            if not target.exists() or target.stat().st_size != f.stat().st_size:
                shutil.copy2(f, target)
    return layout.backends


_WARNED_NO_RERANKER: set[Path] = set()


def has_token_output(onnx_path: Path) -> bool:
    """Whether the exported embedder graph at ``onnx_path`` has the ``token_embeddings``
    output (exports before 2026-12-07 do not; search's late-interaction stage needs it).
    Reads the graph's outputs only (``onnx.load`` without external data, ~0.3 s)."""
    import onnx

    return "token_embeddings" in {o.name for o in onnx.load(str(onnx_path), load_external_data=False).graph.output}


def ensure_models(repository: Path, models: Sequence[str], reranker_dir: Path | None = None) -> list[str]:
    """Export the embedder into ``repository`` when its ONNX file is missing or was
    exported before the graph had its ``token_embeddings`` output (with this
    interpreter, which needs torch) and return the models that can load: the
    reranker only when its weights exist (``reranker_dir`` or ``reranker/1``)."""
    loadable = []
    for name in models:
        if name in ("embedder", "embedder_online"):
            onnx = repository / "embedder" / "1" / "model.onnx"
            if not onnx.exists() or not has_token_output(onnx):
                proc = subprocess.run([sys.executable, str(EMBEDDER_EXPORT), "--output", str(onnx)],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise TritonServerError(f"embedder export failed:\n{proc.stderr[-3000:]}")
        elif name == "reranker":
            rdir = Path(reranker_dir) if reranker_dir else repository / "reranker" / "1"
            if not (rdir / "model.onnx").exists():
                if rdir not in _WARNED_NO_RERANKER:
                    _WARNED_NO_RERANKER.add(rdir)
                    print(f"triton: no reranker weights in {rdir}; not loading 'reranker' "
                          "(search falls back to reciprocal rank fusion)", file=sys.stderr)
                continue
        loadable.append(name)
    return loadable


def _models(settings: Settings) -> list[str]:
    return [m.strip() for m in str(settings.triton_models).split(",") if m.strip()]


def _repository(settings: Settings) -> Path:
    return Path(settings.triton_model_repository or DEFAULT_REPOSITORY).resolve()


def server_argv(settings: Settings, layout: TritonLayout, models: Sequence[str]) -> list[str]:
    """tritonserver argv: explicit model control (only ``models`` load), loopback
    listeners on the settings' ports, strict readiness, exit on a failed load."""
    argv = [
        str(layout.binary),
        f"--model-repository={_repository(settings)}",
        "--model-control-mode=explicit",
        *[f"--load-model={m}" for m in models],
        f"--backend-directory={layout.backends}",
        f"--backend-config=python,shm-default-byte-size={SHM_DEFAULT_BYTES}",
        f"--backend-config=python,shm-growth-byte-size={SHM_DEFAULT_BYTES}",
        f"--http-address={LOOPBACK}", f"--http-port={settings.triton_http_port}",
        f"--grpc-address={LOOPBACK}", f"--grpc-port={settings.triton_grpc_port}",
        f"--metrics-address={LOOPBACK}", f"--metrics-port={settings.triton_metrics_port}",
        "--allow-sagemaker=false", "--allow-vertex-ai=false",
        "--exit-on-error=true", "--strict-readiness=true",
        "--exit-timeout-secs=10",
        "--log-verbose=0",
    ]
    return argv


def server_env(settings: Settings, layout: TritonLayout, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for tritonserver and its stubs (see the module docstring)."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env.pop("VIRTUAL_ENV", None)
    ld = [str(layout.libs), str(layout.python_libdir)]
    if env.get("LD_LIBRARY_PATH"):
        ld.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = ":".join(ld)
    env["PATH"] = f"{layout.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    if settings.triton_threads:
        env["RAGSTREAM_TRITON_THREADS"] = str(settings.triton_threads)
    if settings.reranker_dir:
        env["RAGSTREAM_RERANKER_DIR"] = str(Path(settings.reranker_dir).resolve())
    return env


def _pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def server_ready(http_port: int, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{http_port}/v2/health/ready", timeout=timeout_s) as r:
            return r.status == 200
    except OSError:
        return False


def _group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(entry))
    return pids


class TritonServer:
    """One tritonserver process (plus its Python stubs) started from ``settings``.

    ``start()`` prepares the backend directory, exports missing embedder weights,
    spawns the server in its own session (``PR_SET_PDEATHSIG``: it gets SIGTERM if
    this process dies) and waits for ``/v2/health/ready`` (all loaded models ready)
    up to ``timeout_s`` seconds; ~3-5 s on 2 cores.  ``stop()`` sends SIGTERM to the
    process group, waits ``grace_s`` seconds, then SIGKILLs what is left; afterwards
    no process of the group exists.  Usable as a context manager.
    Raises :class:`TritonServerError` when the server exits or is not ready in time
    (with the log tail).
    """

    def __init__(self, settings: Settings | None = None, *, log_path: Path | None = None,
                 models: Sequence[str] | None = None) -> None:
        self.settings = settings or get_settings()
        self.models = list(models) if models is not None else _models(self.settings)
        self.log_path = Path(log_path) if log_path else (
            Path(self.settings.data_dir).resolve() / "logs" / "triton-server.log")
        self.proc: subprocess.Popen | None = None
        self.loaded: list[str] = []

    @property
    def grpc_url(self) -> str:
        """``host:port`` of the gRPC endpoint."""
        return f"{LOOPBACK}:{self.settings.triton_grpc_port}"

    @property
    def http_url(self) -> str:
        """``host:port`` of the HTTP endpoint."""
        return f"{LOOPBACK}:{self.settings.triton_http_port}"

    @property
    def pid(self) -> int | None:
        """Server pid (also its process group id), None when not started."""
        return self.proc.pid if self.proc else None

    def start(self, timeout_s: float = 120.0) -> "TritonServer":
        """Spawn and wait until ready; see the class docstring."""
        if self.proc and self.proc.poll() is None:
            return self
        layout = ensure_server_env(self.settings.triton_venv)
        prepare_backends(layout)
        self.loaded = ensure_models(_repository(self.settings), self.models, self.settings.reranker_dir)
        argv = server_argv(self.settings, layout, self.loaded)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%F %T')} {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=server_env(self.settings, layout), start_new_session=True,
                preexec_fn=_pdeathsig, close_fds=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise TritonServerError(
                    f"tritonserver exited with {self.proc.returncode}; log {self.log_path}:\n{self._tail()}")
            if server_ready(self.settings.triton_http_port):
                return self
            time.sleep(0.25)
        self.stop()
        raise TritonServerError(f"tritonserver not ready after {timeout_s:.0f} s:\n{self._tail()}")

    def _tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 15.0) -> str:
        """SIGTERM the server's process group, SIGKILL it after ``grace_s`` seconds.
        Returns "stopped", "killed" or "not running"."""
        proc, self.proc = self.proc, None
        if proc is None:
            return "not running"
        pgid = proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + grace_s
        while _group_pids(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        outcome = "stopped"
        if _group_pids(pgid):
            outcome = "killed"
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            end = time.monotonic() + 5
            while _group_pids(pgid) and time.monotonic() < end:
                time.sleep(0.05)
        if proc.poll() is None:
            proc.wait(timeout=5)
        return outcome

    def __enter__(self) -> "TritonServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(settings: Settings | None = None) -> int:
    """Run tritonserver in the foreground until SIGTERM/SIGINT (forwarded to the
    server's process group, so no tritonserver or stub is left behind).  Returns the
    server's exit status (0 after a requested stop)."""
    server = TritonServer(settings)
    stopping = False

    def _on_signal(signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    server.start()
    print(f"triton ready: grpc {server.grpc_url} http {server.http_url} models {server.loaded}",
          flush=True)
    try:
        while not stopping and server.proc is not None and server.proc.poll() is None:
            time.sleep(0.2)
        code = 0 if stopping else (server.proc.returncode if server.proc else 0)
    finally:
        server.stop()
    return code


# ---------------------------------------------------------------- dev stack service

def _register_devstack() -> None:
    from devstack.supervisor import Paths, Service, register

    def command(settings: Settings, paths: Paths) -> list[str]:
        layout = TritonLayout.of(settings.triton_venv)
        models = ensure_models(_repository(settings), _models(settings), settings.reranker_dir)
        return server_argv(settings, layout, models)

    async def prepare(settings: Settings, paths: Paths) -> None:
        import asyncio

        def work() -> None:
            prepare_backends(ensure_server_env(settings.triton_venv))
            ensure_models(_repository(settings), _models(settings), settings.reranker_dir)

        await asyncio.get_running_loop().run_in_executor(None, work)

    async def health(settings: Settings) -> None:
        import asyncio

        if not await asyncio.get_running_loop().run_in_executor(None, server_ready, settings.triton_http_port):
            raise TritonServerError("tritonserver not ready")

    def env(settings: Settings) -> dict[str, str]:
        layout = TritonLayout.of(settings.triton_venv)
        base = server_env(settings, layout, base={})
        # devstack merges this over os.environ: prepend to the inherited PATH
        base["PATH"] = f"{layout.venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return base

    register(Service(
        name="triton",
        command=command,
        health=health,
        ports=lambda s: [s.triton_http_port, s.triton_grpc_port, s.triton_metrics_port],
        endpoint=lambda s: f"grpc://{LOOPBACK}:{s.triton_grpc_port}",
        prepare=prepare,
        env=env,
    ))


try:  # registered when devstack imports this module (SERVICE_MODULES)
    _register_devstack()
except ImportError:  # pragma: no cover - devstack not present
    pass


def main(argv: list[str] | None = None) -> int:
    """``python -m devstack.triton serve [--http-port N --grpc-port N
    --metrics-port N]``: run the server in the foreground."""
    p = argparse.ArgumentParser(prog="python -m devstack.triton")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run tritonserver in the foreground")
    s.add_argument("--http-port", type=int)
    s.add_argument("--grpc-port", type=int)
    s.add_argument("--metrics-port", type=int)
    args = p.parse_args(argv)
    overrides = {k: v for k, v in {
        "triton_http_port": args.http_port, "triton_grpc_port": args.grpc_port,
        "triton_metrics_port": args.metrics_port}.items() if v is not None}
    settings = get_settings().model_copy(update=overrides) if overrides else get_settings()
    return serve(settings)


if __name__ == "__main__":
    sys.exit(main())
