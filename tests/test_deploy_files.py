"""Structure checks for the deployment files that cannot run here (no Docker engine):
the Procfile and docker-compose.yml must name every stage, and every RAGSTREAM_*
variable they set must be a real setting."""
from __future__ import annotations

import yaml

from streams.app import STAGES
from streams.settings import Settings
from tests.conftest import ROOT


def _procfile() -> dict[str, str]:
    lines = [l for l in (ROOT / "Procfile").read_text().splitlines() if l and not l.startswith("#")]
    return dict(l.split(":", 1) for l in lines)


def test_procfile_runs_each_stage_in_its_own_process():
    procs = _procfile()
    for stage in STAGES:
        assert procs[stage].strip() == f"ragstream worker --stages {stage}"
    assert "api" in procs


def test_compose_has_every_stage_and_real_settings():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    for infra in ("kafka", "postgres", "minio", "milvus", "etcd", "triton", "prometheus", "grafana"):
        assert "image" in services[infra], infra
    fields = {f"RAGSTREAM_{name.upper()}" for name in Settings.model_fields}
    for stage in STAGES:
        svc = services[stage]
        assert svc["command"] == ["worker", "--stages", stage]
        unknown = {k for k in svc["environment"] if k.startswith("RAGSTREAM_")} - fields - {
            "RAGSTREAM_BROKER_QUIRKS"}
        assert not unknown, unknown
    assert services["kafka"]["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
