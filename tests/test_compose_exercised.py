"""Compose and Kubernetes, exercised without Docker (issue 27): every ragstream
container of docker-compose.yml and of deploy/k8s (the API, one worker per stage, the
one-shot topics and migrations) is started here as the container would run it — its
own command line over the Dockerfile's ENTRYPOINT, its own environment — with only
the rewrite table of tests/deploy_fleet.py applied (service names to the test stack's
loopback ports, the credentials that stack knows, listening addresses and ports, image
paths).  Then each must work: a one-shot exits 0, a worker joins its consumer group
("ragstream worker: <stage> ready"), every compose healthcheck, Kubernetes probe and
Prometheus scrape answers on the port the files say; and one document uploaded to the
compose-started API goes through the compose-started stages to COMPLETED and is found
by that API's search.  So a wrong variable, command, port or probe path fails here.
tests/test_deploy_files.py and tests/test_k8s_manifests.py check the same files
statically; this module runs them.

The fleets are marked ``drill`` (run last): the session worker is stopped first, so
the started stages are the only members of their consumer groups and do the work.
``RAGSTREAM_TEST_DEPLOY_ROOT`` points the module at another copy of the files
(docker-compose.yml, Dockerfile, deploy/), e.g. a deliberately broken one.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from deploy_fleet import Fleet, NotReady, check_probe, plan, preflight, readiness, stages_of
from deploy_specs import compose_specs, k8s_specs
from streams.app import STAGES

ROOT = Path(__file__).resolve().parents[1]
STARTUP_S = 300  # how long the fleet may take to be ready (18-20 s on a quiet 2-core machine)


@pytest.fixture
def deploy_root() -> Path:
    """Where docker-compose.yml, the Dockerfile and deploy/ are read from."""
    return Path(os.environ.get("RAGSTREAM_TEST_DEPLOY_ROOT", ROOT))


def _broken_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of the deployment files with ``old`` replaced by ``new`` in ``file``."""
    root = tmp_path / "deploy-root"
    shutil.copytree(ROOT / "deploy", root / "deploy")
    for name in ("docker-compose.yml", "Dockerfile"):
        shutil.copy2(ROOT / name, root / name)
    text = (root / file).read_text()
    assert old in text, f"{file} no longer says {old!r}"
    (root / file).write_text(text.replace(old, new, 1))
    return root


# ---------------------------------------------------------------- fast: no stack

def test_every_ragstream_container_is_found_and_only_the_table_changes_it(deploy_root, settings, tmp_path):
    compose, k8s = compose_specs(deploy_root), k8s_specs(deploy_root)
    assert {s.name for s in compose} >= {*STAGES, "api", "topics"}
    assert {stages_of(s.argv)[0] for s in k8s if stages_of(s.argv)} == set(STAGES)
    assert any(s.argv[1:] == ["db", "upgrade"] and s.one_shot for s in k8s)
    for spec in compose + k8s:
        launch = plan(spec, settings, tmp_path)
        table = {"argv", "PATH", "RAGSTREAM_CONVERTER_URL", "RAGSTREAM_BROKER_QUIRKS", "RAGSTREAM_DATA_DIR",
                 "RAGSTREAM_EMBEDDER_ONNX_PATH", "RAGSTREAM_KAFKA_BOOTSTRAP", "RAGSTREAM_S3_ENDPOINT",
                 "RAGSTREAM_S3_ACCESS_KEY", "RAGSTREAM_S3_SECRET_KEY", "RAGSTREAM_PG_DSN", "RAGSTREAM_MILVUS_URI",
                 "RAGSTREAM_TRITON_HOST", "RAGSTREAM_TRITON_HTTP_PORT", "RAGSTREAM_TRITON_GRPC_PORT",
                 "RAGSTREAM_TRITON_METRICS_PORT", "RAGSTREAM_METRICS_HOST", "RAGSTREAM_METRICS_PORT",
                 "RAGSTREAM_API_HOST", "RAGSTREAM_API_PORT"}
        assert set(launch.changed) <= table, (spec.label, set(launch.changed) - table)
        for name, value in spec.env.items():  # everything else exactly as given
            if name not in launch.changed:
                assert launch.env[name] == value, (spec.label, name)
        assert not any(host in v for v in launch.env.values()
                       for host in ("kafka:", "minio:", "postgres:", "milvus:", "//triton", "svc.cluster")), spec.label
    preflight([plan(s, settings, tmp_path) for s in compose + k8s], settings)


def test_without_a_command_the_container_runs_the_dockerfiles_entrypoint_and_cmd(tmp_path):
    root = _broken_copy(tmp_path, "docker-compose.yml", '{<<: *ragstream, command: ["worker", "--stages", "chunk"]}',
                        "{<<: *ragstream}")
    (chunk,) = [s for s in compose_specs(root) if s.name == "chunk"]
    assert chunk.argv == ["ragstream", "worker"]  # Dockerfile: ENTRYPOINT ["ragstream"], CMD ["worker"]
    assert stages_of(chunk.argv) == list(STAGES)


def test_a_misnamed_address_variable_is_refused_before_anything_starts(tmp_path, settings):
    root = _broken_copy(tmp_path, "docker-compose.yml", "    RAGSTREAM_PG_DSN:", "    RAGSTREAM_PG_URL:")
    with pytest.raises(AssertionError) as failed:
        preflight([plan(s, settings, tmp_path) for s in compose_specs(root)], settings)
    assert "compose service normalize: pg_dsn would be" in str(failed.value)
    assert "RAGSTREAM_PG_DSN given as '(not set: the default)'" in str(failed.value)


def test_a_probe_on_a_port_the_process_does_not_listen_on_fails_at_once(tmp_path, settings):
    root = _broken_copy(tmp_path, "deploy/k8s/config.yaml", 'RAGSTREAM_METRICS_PORT: "9100"',
                        'RAGSTREAM_METRICS_PORT: "9101"')
    launch = plan(next(s for s in k8s_specs(root) if s.name == "Deployment/ragstream-embed"), settings, tmp_path)
    with pytest.raises(AssertionError, match=r"k8s Deployment/ragstream-embed: startupProbe reaches container "
                                             r"port 9100, where the process does not listen \(it listens on \[9101\]"):
        Fleet().wait_ready([launch], 60)


@pytest.mark.parametrize("stages, says", [("indx", "error: unknown stage(s) ['indx']; choose from"),
                                          ("", "error: --stages names no stage")])
def test_a_bad_command_fails_naming_the_service(tmp_path, settings, stages, says):
    """A misspelt stage is refused in one line (it was a traceback; an empty list ran
    a supervisor of nothing for ever)."""
    root = _broken_copy(tmp_path, "docker-compose.yml", '"worker", "--stages", "index"',
                        f'"worker", "--stages", "{stages}"')
    fleet = Fleet()
    launch = fleet.start(plan(next(s for s in compose_specs(root) if s.name == "index"), settings, tmp_path))
    try:
        with pytest.raises(AssertionError) as failed:
            fleet.wait_ready([launch], 120)
    finally:
        fleet.stop()
    assert str(failed.value).startswith(f"compose service index (['worker', '--stages', '{stages}']) exited 2 at "
                                        f"start:\n{says}"), str(failed.value)
    assert "Traceback" not in str(failed.value)


@pytest.mark.integration
def test_a_wrong_probe_path_fails_naming_the_service(tmp_path, stack):
    root = _broken_copy(tmp_path, "deploy/k8s/api.yaml", "httpGet: {path: /readyz, port: http}",
                        "httpGet: {path: /ready, port: http}")
    fleet = Fleet()
    launch = fleet.start(plan(next(s for s in k8s_specs(root) if s.name == "Deployment/ragstream-api"), stack,
                              tmp_path))
    try:
        with pytest.raises(AssertionError, match=r"^k8s Deployment/ragstream-api: readinessProbe: GET /ready on "
                                                 r"container port http answered 404$"):
            fleet.wait_ready([launch], STARTUP_S)  # the startupProbe's /healthz passes first
    finally:
        fleet.stop()


@pytest.mark.integration
def test_a_compose_healthcheck_runs_in_the_containers_environment(tmp_path, stack):
    """No ragstream service has a healthcheck today; one added runs as Docker runs it,
    inside the container (localhost:8080 is the API's own port there)."""
    check = ("python -c \"import os, urllib.request; assert os.environ['RAGSTREAM_EMBEDDER'] == 'triton'; "
             "urllib.request.urlopen('http://localhost:8080/healthz')\"")
    root = _broken_copy(tmp_path, "docker-compose.yml", '    ports: ["8080:8080"]\n',
                        f'    ports: ["8080:8080"]\n    healthcheck: {{test: ["CMD-SHELL", {json.dumps(check)}]}}\n')
    fleet = Fleet()
    launch = fleet.start(plan(next(s for s in compose_specs(root) if s.name == "api"), stack, tmp_path))
    try:
        fleet.wait_ready([launch], STARTUP_S)  # the healthcheck passed, with the probes
        (probe,) = [p for p in launch.spec.probes if p.kind == "exec"]
        with pytest.raises(NotReady, match=r"compose service api: healthcheck .* exited 1"):
            check_probe(launch, dataclasses.replace(probe, command=tuple(w.replace("/healthz", "/nope")
                                                                          for w in probe.command)))
    finally:
        fleet.stop()


# ---------------------------------------------------------------- the fleets

def _one_off(launch, args: list[str], settings, tmp_path: Path) -> str:
    """``docker compose run SERVICE ARGS`` / ``kubectl exec``: ARGS under the
    container's entrypoint and environment; its stdout."""
    once = plan(launch.spec, settings, tmp_path / "one-off", argv=args)
    done = subprocess.run(once.argv, env=once.env, cwd=once.cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{launch.spec.label} {args}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
    return done.stdout


def _ingest_and_search(api, settings, tmp_path: Path) -> None:
    """One document through ``api`` (a running launch of ``ragstream api``): uploaded,
    COMPLETED by the stages, found by search."""
    project = "x" + uuid.uuid4().hex[:10]
    key = _one_off(api, ["apikey", "create", "--project", project], settings, tmp_path).strip().splitlines()[-1]
    url, headers = f"http://127.0.0.1:{api.ports[8080]}", {"X-API-Key": key}
    r = httpx.post(f"{url}/v1/documents", headers=headers, timeout=60,
                   files={"file": ("otters.txt", b"Sea otters hold hands while they sleep so that they do not "
                                                 b"drift apart on the kelp beds.\n", "text/plain")})
    assert r.status_code == 202, r.text
    doc_id = r.json()["document_id"]
    deadline = time.monotonic() + 240
    while (body := httpx.get(f"{url}/v1/documents/{doc_id}", headers=headers, timeout=30).json()
           )["status"] not in ("COMPLETED", "FAILED"):
        assert time.monotonic() < deadline, f"{api.spec.label}: {doc_id} not terminal: {body}"
        time.sleep(1)
    assert body["status"] == "COMPLETED", body
    hits = httpx.post(f"{url}/v1/search", headers=headers, timeout=120, json={"query": "otters asleep", "k": 3})
    assert hits.status_code == 200, hits.text
    assert [h["document_id"] for h in hits.json()["hits"]][:1] == [doc_id], hits.json()


def _run_fleet(specs, settings, tmp_path: Path, worker) -> list:
    """Start every spec, wait until all are ready, ingest a document through the
    API among them, stop them all; the launches (their logs stay)."""
    from devstack.worker_process import stop_worker

    stop_worker(worker)  # the started stages are then the only members of their groups
    launches = [plan(s, settings, tmp_path) for s in specs]
    preflight(launches, settings)
    fleet = Fleet()
    try:
        for launch in launches:
            fleet.start(launch)
        fleet.wait_ready(launches, STARTUP_S)
        (api,) = [l for l in launches if l.argv[1] == "api"]
        _ingest_and_search(api, settings, tmp_path)
    finally:
        fleet.stop()
    for launch in launches:  # started, worked and stopped without an error logged
        errors = [line for line in launch.tail(10**7).splitlines()
                  if "Traceback" in line or "[ERROR]" in line or line.startswith("ERROR:")
                  or "could not release" in line]
        assert not errors, (launch.spec.label, errors, launch.tail())
    return launches


def _consumption(launch) -> tuple[str, set[str]]:
    """The consumer group a stage worker joined and the topics it was assigned, as its log says."""
    log = launch.tail(10**7)
    group = re.search(r"ragstream worker: stage \w+; consumer group (\S+);", log).group(1)
    assigned = re.search(r"ragstream worker: \w+ ready, assigned (.*)", log).group(1)
    return group, {part.split()[0] for part in assigned.split("; ")}


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.drill
def test_the_compose_services_run_and_ingest_a_document(deploy_root, stack, worker, tmp_path):
    _run_fleet(compose_specs(deploy_root), stack, tmp_path, worker)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.drill
def test_the_kubernetes_workloads_run_and_ingest_a_document(deploy_root, stack, worker, tmp_path):
    launches = _run_fleet(k8s_specs(deploy_root), stack, tmp_path, worker)
    # KEDA scales each Deployment on the lag of the group its workers joined, on a topic they consume
    ran = {l.spec.name.split("/")[1]: _consumption(l) for l in launches if stages_of(l.argv)}
    keda = [d for d in yaml.safe_load_all((deploy_root / "deploy/k8s/keda.yaml").read_text())
            if d and d["kind"] == "ScaledObject"]
    assert keda
    for scaled in keda:
        group, topics = ran[scaled["spec"]["scaleTargetRef"]["name"]]
        for trigger in scaled["spec"]["triggers"]:
            assert (trigger["metadata"]["consumerGroup"], trigger["metadata"]["topic"] in topics) == (group, True), (
                scaled["metadata"]["name"], group, topics)
