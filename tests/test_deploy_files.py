"""Structure checks for the deployment files that cannot run here (no Docker engine):
the Procfile and docker-compose.yml must name every stage, and every RAGSTREAM_*
variable they set must be a real setting."""
from __future__ import annotations

import re

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


def test_packaging_names_every_package_and_the_image_copies_them():
    """Every top-level package with an __init__.py is in pyproject's package list
    (with its subpackages) and is copied into the image; the console script
    points at a function that exists."""
    import importlib
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    tops = [d for d in ROOT.iterdir() if d.is_dir() and not d.is_symlink()
            and not d.name.startswith(".") and d.name not in ("tests", "triton")]
    on_disk = {str(p.parent.relative_to(ROOT)).replace("/", ".") for d in tops for p in d.rglob("__init__.py")}
    assert on_disk <= listed, f"packages missing from pyproject: {sorted(on_disk - listed)}"
    copied = set(re.findall(r"^COPY (\w+)/ ", (ROOT / "Dockerfile").read_text(), re.M))
    top = {name.split(".")[0] for name in listed}
    assert top <= copied, f"packages the Dockerfile does not copy: {sorted(top - copied)}"
    module, func = project["project"]["scripts"]["ragstream"].split(":")
    assert callable(getattr(importlib.import_module(module), func))


def test_the_image_points_the_onnx_embedder_at_the_model_it_exports():
    """Issue 27 finding 2: the image installs the package non-editable, so the
    embedder's default path (beside the package, in site-packages) has no model; the
    image must name the file its build exports."""
    text = (ROOT / "Dockerfile").read_text()
    exported = re.search(r"export_embedder\.py --output (\S+)", text).group(1)
    workdir = re.search(r"^WORKDIR (\S+)", text, re.M).group(1)
    env = re.search(r"^ENV RAGSTREAM_EMBEDDER_ONNX_PATH=(\S+)", text, re.M).group(1)
    assert env == f"{workdir}/{exported}"
