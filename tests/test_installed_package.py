"""ragstream installed as the image installs it (issue 27): the wheel, installed
non-editable in a folder of its own, runs a worker and the API against the test stack,
away from the checkout (no repository files on the path); a document uploaded to that
API is processed by that worker, and search answers through the in-process ONNX
fallback with Triton unreachable for the API (finding 2: the fallback looked for its
model beside the installed package, where a wheel puts none; the image sets
RAGSTREAM_EMBEDDER_ONNX_PATH, and so does this test).

Marked ``drill`` (runs last): the session worker is stopped, so the installed worker
is the only member of the stage groups and must do the work itself.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from api_helpers import free_port, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.drill, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """``{"env", "cwd"}`` to run the wheel's ``python -m cli`` from a folder of its own:
    built from a copy of the checkout's files (a stale build/ can never leak in)."""
    work = tmp_path_factory.mktemp("wheel")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    src = work / "src"
    for rel in files:
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src),
                    "-w", str(work / "dist")], check=True, capture_output=True, timeout=300)
    (wheel,) = (work / "dist").glob("ragstream-*.whl")
    site = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    run_dir = work / "run"
    run_dir.mkdir()
    from adapters.embedder import DEFAULT_ONNX_PATH, export_onnx

    model = DEFAULT_ONNX_PATH if DEFAULT_ONNX_PATH.is_file() else export_onnx(DEFAULT_ONNX_PATH)
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONUNBUFFERED": "1",
           "RAGSTREAM_EMBEDDER_ONNX_PATH": str(model)}  # as the Dockerfile sets it
    where = subprocess.run([sys.executable, "-c", "import cli, api, streams; print(cli.__file__, api.__file__)"],
                           cwd=run_dir, env=env, capture_output=True, text=True, check=True).stdout
    assert str(ROOT) not in where and str(site) in where, where
    return {"env": env, "cwd": run_dir}


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited ({proc.returncode}): {log.read_text(errors='replace')[-3000:]}"
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in {timeout_s} s: {log.read_text(errors='replace')[-3000:]}")


def test_the_installed_package_runs_a_worker_and_the_api_with_search(installed, stack, worker, tmp_path):
    from devstack.worker_process import stop_worker

    stop_worker(worker)  # the installed worker must be the one that does the work
    env, cwd = installed["env"], installed["cwd"]
    metrics = free_port()
    worker_log, api_log = tmp_path / "worker.log", tmp_path / "api.log"
    procs = [subprocess.Popen([sys.executable, "-m", "cli", "worker"], cwd=cwd, stdout=open(worker_log, "wb"),
                              stderr=subprocess.STDOUT, start_new_session=True,
                              env={**env, "RAGSTREAM_METRICS_PORT": str(metrics)})]
    try:
        _wait_http(f"http://127.0.0.1:{metrics}/metrics", procs[0], worker_log, 180)
        port, dead = free_port(), free_port()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "cli", "api", "--host", "127.0.0.1", "--port", str(port)], cwd=cwd,
            stdout=open(api_log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
            env={**env, "RAGSTREAM_TRITON_GRPC_PORT": str(dead), "RAGSTREAM_TRITON_HTTP_PORT": str(dead)}))
        url = f"http://127.0.0.1:{port}"
        _wait_http(url + "/healthz", procs[1], api_log, 90)
        project = "w" + uuid.uuid4().hex[:10]
        key = subprocess.run([sys.executable, "-m", "cli", "apikey", "create", "--project", project], cwd=cwd,
                             env=env, capture_output=True, text=True, check=True, timeout=120
                             ).stdout.strip().splitlines()[-1]
        doc = tmp_path / "heron.txt"
        doc.write_text("The grey heron stood motionless in the reed bed at dawn.\n")
        with doc.open("rb") as f:
            r = httpx.post(url + "/v1/documents", headers={"X-API-Key": key}, timeout=60,
                           files={"file": (doc.name, f, "text/plain")})
        assert r.status_code == 202, r.text
        doc_id = r.json()["document_id"]
        deadline = time.monotonic() + 180
        while (body := httpx.get(f"{url}/v1/documents/{doc_id}", headers={"X-API-Key": key},
                                 timeout=30).json())["status"] not in ("COMPLETED", "FAILED"):
            assert time.monotonic() < deadline, body
            time.sleep(1)
        assert body["status"] == "COMPLETED", body
        hits = httpx.post(url + "/v1/search", headers={"X-API-Key": key}, timeout=120,
                          json={"query": "heron in the reeds", "k": 3})
        assert hits.status_code == 200, hits.text
        assert hits.json()["hits"][0]["document_id"] == doc_id
    finally:
        for proc in reversed(procs):
            stop_process(proc)
