"""The production deployment files, validated offline (no cluster, no Docker engine, no
network):

- deploy/k8s/ (kustomize): every Kubernetes object against the Kubernetes JSON schemas
  of the PyPI package kubernetes-validate (strict: unknown fields are errors), every KEDA
  ScaledObject against deploy/schemas/keda-scaledobject-v1alpha1.json, plus the
  ragstream-specific rules (one Deployment per stage, settings that exist, each stage
  scaled on its own consumer group's lag, max replicas within the partition count,
  Triton on a GPU node);
- docker-compose.yml against the Compose Specification schema
  (deploy/schemas/compose-spec.json); Prometheus targets against the compose services;
- the Grafana dashboard: every metric its PromQL names is one the code defines, or one
  of Triton's.

deploy/schemas/refresh.py says where the vendored schemas come from and rebuilds them.
Each validator is shown to reject a deliberately broken document.
"""
from __future__ import annotations

import copy
import importlib
import json
import re
import subprocess
import sys
import urllib.request
from types import SimpleNamespace

import jsonschema_rs
import kubernetes_validate
import pytest
import yaml

from streams.app import STAGES, app_id
from streams.settings import Settings
from tests.conftest import ROOT
from topics import ALL, stage_sources

K8S = ROOT / "deploy" / "k8s"
SCHEMAS = ROOT / "deploy" / "schemas"
GRAFANA = ROOT / "deploy" / "grafana"
# the Kubernetes minor version the manifests are validated for (KEDA 2.16 supports 1.29-1.31)
K8S_VERSION = "1.31"
# RAGSTREAM_* variables that are not Settings fields, each read directly by one module
NON_SETTINGS_ENV = {"RAGSTREAM_BROKER_QUIRKS": ROOT / "streams" / "broker_quirks.py"}
# Triton's Prometheus metrics (Triton user guide, "Metrics": inference request, latency
# and GPU metrics), the only names outside the code that the dashboard may use
TRITON_METRICS = {
    "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
    "nv_inference_exec_count", "nv_inference_pending_request_count",
    "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us", "nv_gpu_utilization", "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes", "nv_gpu_power_usage", "nv_gpu_power_limit", "nv_energy_consumption",
    "nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes",
}


# ---------------------------------------------------------------- loading

def _kustomize() -> list[dict]:
    """The objects `kubectl apply -k deploy/k8s` would create: every document of every
    resource file the kustomization lists, with its namespace set (the other
    kustomize transformations, labels and images, do not change what is validated)."""
    kz = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = {K8S / r for r in kz["resources"]}
    on_disk = {p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert on_disk == listed, f"not in kustomization.yaml: {on_disk - listed}; missing: {listed - on_disk}"
    docs = []
    for path in (K8S / r for r in kz["resources"]):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc, f"{path}: empty YAML document"
            if doc["kind"] != "Namespace":
                doc.setdefault("metadata", {})["namespace"] = kz["namespace"]
            docs.append(doc)
    return docs


DOCS = _kustomize()


def _objects(kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


def _config() -> dict[str, str]:
    """The ConfigMap's data and the Secret's stringData, merged."""
    cm = _objects("ConfigMap")["ragstream-config"]
    secret = _objects("Secret")["ragstream-secrets"]
    return {**cm["data"], **secret["stringData"]}


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


# the vendored schema of each KEDA kind the manifests use (deploy/schemas/refresh.py)
KEDA_SCHEMAS = {"ScaledObject": "keda-scaledobject-v1alpha1.json",
                "TriggerAuthentication": "keda-triggerauthentication-v1alpha1.json"}


def _keda_validator(kind: str = "ScaledObject"):
    return jsonschema_rs.validator_for(json.loads((SCHEMAS / KEDA_SCHEMAS[kind]).read_text()))


def _compose_validator():
    return jsonschema_rs.validator_for(json.loads((SCHEMAS / "compose-spec.json").read_text()))


def _k8s_errors(doc: dict) -> list[str]:
    """Schema errors of one object ([] when valid): KEDA's schemas for its kinds,
    kubernetes-validate's strict schemas for everything else."""
    if doc["kind"] in KEDA_SCHEMAS:
        return [f"{e.instance_path}: {e.message}" for e in _keda_validator(doc["kind"]).iter_errors(doc)]
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{list(e.path)}: {e.message}"]
    return []


# ---------------------------------------------------------------- schemas

@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_manifest_validates_against_its_schema(doc):
    assert _k8s_errors(doc) == []


def test_compose_validates_against_the_compose_spec():
    errors = [f"{e.instance_path}: {e.message}" for e in _compose_validator().iter_errors(_compose())]
    assert errors == []


def _broken(kind: str, name: str, mutate) -> dict:
    doc = copy.deepcopy(_objects(kind)[name])
    mutate(doc)
    return doc


BROKEN_MANIFESTS = {
    # a misspelt field (strict schema: additionalProperties false)
    "container field misspelt": _broken("Deployment", "ragstream-embed", lambda d: d["spec"]["template"]["spec"]
                                        ["containers"][0].update(resource=d["spec"]["template"]["spec"]
                                                                 ["containers"][0].pop("resources"))),
    "replicas not an integer": _broken("Deployment", "ragstream-api", lambda d: d["spec"].update(replicas="two")),
    "service port missing": _broken("Service", "triton", lambda d: d["spec"]["ports"][0].pop("port")),
    "ScaledObject maxReplicas (not maxReplicaCount)": _broken(
        "ScaledObject", "ragstream-embed", lambda d: d["spec"].update(maxReplicas=d["spec"].pop("maxReplicaCount"))),
    "ScaledObject trigger metadata not a string": _broken(
        "ScaledObject", "ragstream-partition", lambda d: d["spec"]["triggers"][0]["metadata"].update(lagThreshold=2)),
    "ScaledObject without scaleTargetRef": _broken(
        "ScaledObject", "ragstream-chunk", lambda d: d["spec"].pop("scaleTargetRef")),
    "ScaledObject fallback replicas not an integer": _broken(
        "ScaledObject", "ragstream-index", lambda d: d["spec"]["fallback"].update(replicas="2")),
    "TriggerAuthentication secret ref without its key": _broken(
        "TriggerAuthentication", "ragstream-kafka", lambda d: d["spec"]["secretTargetRef"][0].pop("key")),
}


@pytest.mark.parametrize("name", BROKEN_MANIFESTS)
def test_manifest_validators_reject_a_broken_manifest(name):
    assert _k8s_errors(BROKEN_MANIFESTS[name]), f"{name}: accepted"


@pytest.mark.parametrize("mutate", [
    lambda c: c["services"]["embed"].update(commands=["worker"]),  # unknown service key
    lambda c: c["services"]["api"].update(depends_on={"kafka": {"condition": "service_up"}}),
    lambda c: c.update(service={}),  # unknown top-level key
], ids=["unknown service key", "bad depends_on condition", "unknown top-level key"])
def test_compose_validator_rejects_a_broken_file(mutate):
    compose = _compose()
    mutate(compose)
    assert list(_compose_validator().iter_errors(compose))


# ---------------------------------------------------------------- ragstream rules

def test_one_deployment_per_stage_runs_that_stage_with_probes_and_resources():
    deployments = _objects("Deployment")
    metrics_port = int(_config()["RAGSTREAM_METRICS_PORT"])
    assert _config()["RAGSTREAM_METRICS_HOST"] == "0.0.0.0"  # else probes cannot reach it
    for stage in STAGES:
        pod = deployments[f"ragstream-{stage}"]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["args"] == ["worker", "--stages", stage]  # the Procfile's command
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports == {"metrics": metrics_port}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, (stage, probe)
    for name, dep in deployments.items():
        for c in dep["spec"]["template"]["spec"]["containers"]:
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), name
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), name
            assert "livenessProbe" in c and "readinessProbe" in c, name


def test_every_ragstream_variable_is_a_real_setting():
    fields = {f"RAGSTREAM_{name.upper()}" for name in Settings.model_fields}
    names = set(_config())
    for dep in _objects("Deployment").values():
        for c in dep["spec"]["template"]["spec"]["containers"]:
            names |= {e["name"] for e in c.get("env", [])}
            for src in c.get("envFrom", []):
                ref = src.get("configMapRef") or src.get("secretRef")
                assert ref["name"] in {"ragstream-config", "ragstream-secrets"}, ref
    ragstream = {n for n in names if n.startswith("RAGSTREAM_")}
    assert ragstream - fields <= set(NON_SETTINGS_ENV), ragstream - fields - set(NON_SETTINGS_ENV)
    for name, reader in NON_SETTINGS_ENV.items():
        assert name in reader.read_text()
    assert {"RAGSTREAM_S3_SECRET_KEY", "RAGSTREAM_PG_DSN"} <= set(_objects("Secret")["ragstream-secrets"]["stringData"])


def _partitions(topic_name: str) -> int:
    spec = next(s for s in ALL if s.name == topic_name)
    return spec.partitions or int(_config()["RAGSTREAM_TOPIC_PARTITIONS"])


def test_keda_scales_each_stage_on_its_consumer_group_lag_within_its_partitions():
    scaled = _objects("ScaledObject")
    deployments = _objects("Deployment")
    assert {"ragstream-embed", "ragstream-partition"} <= set(scaled)
    for name, so in scaled.items():
        stage = name.removeprefix("ragstream-")
        spec = so["spec"]
        assert spec["scaleTargetRef"]["name"] in deployments
        assert "replicas" not in deployments[spec["scaleTargetRef"]["name"]]["spec"], "KEDA owns replicas"
        assert spec["minReplicaCount"] <= spec["fallback"]["replicas"] <= spec["maxReplicaCount"], name
        # one trigger per topic the stage consumes (the partition stage: two)
        assert [t["metadata"]["topic"] for t in spec["triggers"]] == [s.name for s in stage_sources(stage)]
        for trigger in spec["triggers"]:
            meta = trigger["metadata"]
            assert trigger["type"] == "kafka"
            # KEDA resolves the address in its own namespace, from the target's environment
            assert "bootstrapServers" not in meta
            assert meta["bootstrapServersFromEnv"] == "RAGSTREAM_KAFKA_BOOTSTRAP"
            assert trigger["authenticationRef"]["name"] in _objects("TriggerAuthentication")
            assert meta["consumerGroup"] == app_id(stage)
            assert int(meta["lagThreshold"]) > 0
            assert meta["offsetResetPolicy"] == "earliest"  # the workers' auto_offset_reset
            assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= _partitions(meta["topic"]), name


def test_every_deployment_has_a_disruption_budget_that_lets_a_drain_finish():
    budgets = _objects("PodDisruptionBudget")
    for name, dep in _objects("Deployment").items():
        labels = dep["spec"]["template"]["metadata"]["labels"]
        matching = [b for b in budgets.values()
                    if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        assert len(matching) == 1, name
        assert matching[0]["spec"].get("maxUnavailable") == 1, name


def test_images_carry_the_project_version_not_latest():
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    kz = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    (image,) = [i for i in kz["images"] if i["name"] == "ragstream"]
    assert image["newTag"] == version
    for name, dep in _objects("Deployment").items():
        for c in dep["spec"]["template"]["spec"]["containers"]:
            if c["image"].partition(":")[0] == "ragstream":
                assert c["image"] == f"ragstream:{version}", name
    compose_images = {s["image"] for s in _compose()["services"].values() if "image" in s}
    assert f"ragstream:{version}" in compose_images
    assert not [i for i in compose_images if i.endswith(":latest") or ":" not in i]


def test_release_jobs_run_real_commands_and_carry_the_release_in_their_names():
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    jobs = _objects("Job")
    commands = {tuple(j["spec"]["template"]["spec"]["containers"][0]["args"]) for j in jobs.values()}
    assert commands == {("db", "upgrade"), ("topics",)}
    for name, job in jobs.items():
        assert name.endswith("-" + version.replace(".", "-")), name
        (c,) = job["spec"]["template"]["spec"]["containers"]
        assert c["image"] == f"ragstream:{version}"
        assert {s.get("configMapRef", s.get("secretRef"))["name"] for s in c["envFrom"]} == \
            {"ragstream-config", "ragstream-secrets"}
        out = subprocess.run([sys.executable, "-m", "cli", *c["args"], "--help"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (name, out.stderr[-500:])


def test_kafka_address_resolves_from_any_namespace():
    """KEDA's operator (namespace keda) reads the lag: a bare service name would
    resolve in its namespace, not ragstream's."""
    for address in _config()["RAGSTREAM_KAFKA_BOOTSTRAP"].split(","):
        host = address.rpartition(":")[0]
        assert host.endswith(".svc.cluster.local") or "." in host, address


def test_keda_logs_in_to_kafka_with_the_workers_credentials():
    """The TriggerAuthentication reads every parameter from keys the Secret defines,
    username and password from the workers' own settings, with values KEDA's Kafka
    scaler accepts; and the workers' settings parse (a SASL protocol needs a user)."""
    (auth,) = _objects("TriggerAuthentication").values()
    secret = _objects("Secret")["ragstream-secrets"]["stringData"]
    refs = {r["parameter"]: r for r in auth["spec"]["secretTargetRef"]}
    assert {"sasl", "tls", "username", "password"} <= set(refs)
    for ref in refs.values():
        assert ref["name"] == "ragstream-secrets" and ref["key"] in secret, ref
    assert refs["username"]["key"] == "RAGSTREAM_KAFKA_SASL_USERNAME"
    assert refs["password"]["key"] == "RAGSTREAM_KAFKA_SASL_PASSWORD"
    assert secret[refs["sasl"]["key"]] in {"none", "plaintext", "scram_sha256", "scram_sha512"}
    assert secret[refs["tls"]["key"]] in {"enable", "disable"}
    ragstream = {k.removeprefix("RAGSTREAM_").lower(): v for k, v in _config().items()
                 if k.startswith("RAGSTREAM_") and k not in NON_SETTINGS_ENV}
    settings = Settings(**ragstream)
    assert settings.topic_replication_factor >= settings.topic_min_insync_replicas >= 1
    protocol = settings.kafka_security_protocol
    assert (secret[refs["sasl"]["key"]] != "none") == protocol.startswith("SASL"), protocol
    assert (secret[refs["tls"]["key"]] == "enable") == protocol.endswith("SSL"), protocol
    if protocol.startswith("SASL"):  # KEDA's name for the workers' mechanism
        mechanism = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256",
                     "SCRAM-SHA-512": "scram_sha512"}[settings.kafka_sasl_mechanism]
        assert secret[refs["sasl"]["key"]] == mechanism, (mechanism, secret[refs["sasl"]["key"]])
    # mutual TLS: KEDA must present the client certificate the workers present
    assert {"cert", "key"} <= set(refs)
    assert bool(secret[refs["cert"]["key"]]) == bool(secret[refs["key"]["key"]])


def test_compose_kafka_keeps_its_log_in_its_volume():
    kafka = _compose()["services"]["kafka"]
    mounts = {v.partition(":")[2] for v in kafka["volumes"]}
    assert kafka["environment"]["KAFKA_LOG_DIRS"] in mounts


def test_triton_runs_on_a_gpu_node_with_probes_and_its_model_repository():
    pod = _objects("Deployment")["triton"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    # the repository is baked into the image triton/Dockerfile.gpu builds (at /models)
    assert c["image"].partition(":")[0] == "ragstream-triton"
    assert "--model-repository=/models" in c["args"]
    dockerfile = (ROOT / "triton" / "Dockerfile.gpu").read_text()
    assert "build_gpu_repository.py --output /models" in dockerfile and "tokenizers" in dockerfile
    compose_triton = _compose()["services"]["triton"]
    assert compose_triton["build"]["dockerfile"] == "triton/Dockerfile.gpu"
    assert compose_triton["image"] == c["image"] and "volumes" not in compose_triton
    service_ports = {p["name"]: p["port"] for p in _objects("Service")["triton"]["spec"]["ports"]}
    cfg = _config()
    assert cfg["RAGSTREAM_TRITON_HOST"] == "triton"
    assert service_ports == {"http": int(cfg["RAGSTREAM_TRITON_HTTP_PORT"]),
                             "grpc": int(cfg["RAGSTREAM_TRITON_GRPC_PORT"]),
                             "metrics": int(cfg["RAGSTREAM_TRITON_METRICS_PORT"])}


def test_compose_clients_use_the_triton_service_ports():
    """The settings' Triton ports default to the embedded stack's (18000-18002); the
    compose triton container serves Triton's own (8000-8002), so compose must say so."""
    services = _compose()["services"]
    env = services["embed"]["environment"]
    assert "--model-repository=/models" in services["triton"]["command"]
    assert (env["RAGSTREAM_TRITON_HOST"], env["RAGSTREAM_TRITON_HTTP_PORT"], env["RAGSTREAM_TRITON_GRPC_PORT"],
            env["RAGSTREAM_TRITON_METRICS_PORT"]) == ("triton", "8000", "8001", "8002")


# ---------------------------------------------------------------- Prometheus, Grafana

def test_prometheus_scrapes_api_every_worker_and_triton_in_compose():
    services = _compose()["services"]
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    targets = {t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    hosts = {t.split(":")[0] for t in targets}
    assert hosts <= set(services), hosts - set(services)
    api_cmd = services["api"]["command"]
    assert f"api:{api_cmd[api_cmd.index('--port') + 1]}" in targets
    assert "triton:8002" in targets  # Triton's default metrics port (compose passes none)
    metrics_port = services["embed"]["environment"]["RAGSTREAM_METRICS_PORT"]
    assert services["embed"]["environment"]["RAGSTREAM_METRICS_HOST"] == "0.0.0.0"
    assert {f"{stage}:{metrics_port}" for stage in STAGES} <= targets
    assert "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in services["prometheus"]["volumes"]


def test_compose_mounts_the_grafana_provisioning():
    grafana = _compose()["services"]["grafana"]
    mounts = {v.split(":")[1]: (ROOT / v.split(":")[0]).resolve() for v in grafana["volumes"]}
    assert mounts["/etc/grafana/provisioning"] == (GRAFANA / "provisioning").resolve()
    (provider,) = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "ragstream.yaml").read_text())["providers"]
    assert (mounts[provider["options"]["path"]] / "ragstream.json").is_file()
    (ds,) = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())["datasources"]
    prom_port = _compose()["services"]["prometheus"]["ports"][0].split(":")[-1]
    assert ds["type"] == "prometheus" and ds["url"] == f"http://prometheus:{prom_port}"


def code_metric_names() -> set[str]:
    """Every series name the code's prometheus_client metrics expose: a Counter ``x``
    as ``x_total``/``x_created``, a Histogram as ``_bucket``/``_sum``/``_count``."""
    names: set[str] = set()
    pattern = re.compile(r'\b(Counter|Gauge|Histogram|Summary)\(\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"')
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        if rel[0].startswith(".") or rel[0] == "tests":
            continue
        for kind, name in pattern.findall(path.read_text()):
            if kind == "Counter":
                base = name.removesuffix("_total")
                names |= {f"{base}_total", f"{base}_created"}
            elif kind == "Gauge":
                names.add(name)
            else:
                names |= {name, f"{name}_bucket", f"{name}_sum", f"{name}_count", f"{name}_created"}
    return names


_PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
                 "unless", "offset", "inf", "nan"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    keywords, label names (in ``{...}``, ``by (...)``) or strings."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    idents = re.findall(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr)
    return {i for i in idents if i not in _PROMQL_WORDS}


def _unknown_metrics(expr: str, known: set[str]) -> set[str]:
    return {n for n in promql_metric_names(expr) if n not in known and n not in TRITON_METRICS}


def test_dashboard_panels_use_only_metrics_the_code_or_triton_defines():
    dash = json.loads((GRAFANA / "dashboards" / "ragstream.json").read_text())
    known = code_metric_names()
    assert {"ragstream_stage_events_total", "ragstream_stage_seconds_bucket", "ragstream_stage_lag_messages",
            "ragstream_triton_batch_size_sum"} <= known  # the scan sees the code's metrics
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    used: set[str] = set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = promql_metric_names(target["expr"])
            assert names, (panel["title"], target["expr"])
            assert not _unknown_metrics(target["expr"], known), (panel["title"], _unknown_metrics(target["expr"], known))
            used |= names
    # the panels the issue asks for: lag, throughput, stage latency, failures, Triton batches and queue time
    assert {"ragstream_stage_lag_messages", "ragstream_stage_events_total", "ragstream_stage_seconds_bucket",
            "nv_inference_count", "nv_inference_exec_count", "nv_inference_queue_duration_us"} <= used
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    assert "histogram_quantile" in exprs and 'outcome=~"failed' in exprs


def test_alert_rules_use_only_known_metrics_and_prometheus_loads_them():
    rules_file = ROOT / "deploy" / "prometheus-rules.yml"
    (group,) = yaml.safe_load(rules_file.read_text())["groups"]
    known = code_metric_names() | {"up"}  # Prometheus' own per-target series
    jobs = {job["job_name"] for job in yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
            ["scrape_configs"]}
    assert len(group["rules"]) >= 5
    for rule in group["rules"]:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["alert"].startswith("Ragstream") and rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "runbook"} <= set(rule["annotations"]), rule["alert"]
        assert promql_metric_names(rule["expr"]), rule["alert"]
        assert not _unknown_metrics(rule["expr"], known), (rule["alert"], _unknown_metrics(rule["expr"], known))
        for job in re.findall(r'job="([^"]+)"', rule["expr"]):
            assert job in jobs, (rule["alert"], job)
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    (mounted,) = prom["rule_files"]
    assert f"./deploy/prometheus-rules.yml:{mounted}:ro" in _compose()["services"]["prometheus"]["volumes"]


def test_the_promql_check_rejects_an_unknown_metric():
    known = code_metric_names()
    assert _unknown_metrics('sum by (stage) (rate(ragstream_stage_event_total{outcome="ok"}[5m]))', known) == {
        "ragstream_stage_event_total"}
    assert _unknown_metrics("rate(nv_inference_queue_time_us[5m])", known) == {"nv_inference_queue_time_us"}
    assert _unknown_metrics('histogram_quantile(0.9, sum by (le) (rate(ragstream_stage_seconds_bucket[1m])))',
                            known) == set()


# ---------------------------------------------------------------- metrics address

def test_worker_metrics_listen_on_the_configured_host():
    """Containers set RAGSTREAM_METRICS_HOST=0.0.0.0 so Prometheus and kubelet probes reach
    a worker's /metrics from outside the pod: on 0.0.0.0 the server answers on a
    loopback address other than 127.0.0.1 (a 127.0.0.1-only server would not)."""
    from streams.metrics import serve_metrics

    from devstack.ports import free_port_block

    port = free_port_block(1)
    serve_metrics(port, "0.0.0.0")
    with urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=10) as r:
        assert b"ragstream_stage_events_total" in r.read()


# the measured memory of each pool-using stage's worker beside its parse processes (PSS
# of the worker's process tree, idle, `ragstream worker --stages S` on the embedded
# stack, 2-core VM, 2026-12-05): partition 792 MiB (the worker and its preloaded parse
# server), normalize 175, chunk 161; rounded up
POOL_STAGE_BASELINE_MIB = {"partition": 800, "normalize": 200, "chunk": 200}


def _mebibytes(quantity: str) -> int:
    units = {"Mi": 1, "Gi": 1024}
    return int(quantity[:-2]) * units[quantity[-2:]]


def test_pool_stage_pods_hold_their_parse_processes_at_their_cap():
    """A stage whose work runs in the blocking pool (stages/pool.py) caps each pool
    process's address space at RAGSTREAM_PARSE_MEMORY_MB: the pod's memory limit must
    hold the worker and stage_workers processes at that cap, or a runaway parse gets
    the pod OOM-killed (and its document redelivered to the next pod) instead of
    failing that document."""
    defaults = {name: f.default for name, f in Settings.model_fields.items()}
    for stage, baseline in POOL_STAGE_BASELINE_MIB.items():
        (c,) = _objects("Deployment")[f"ragstream-{stage}"]["spec"]["template"]["spec"]["containers"]
        env = {**_config(), **{e["name"]: e["value"] for e in c.get("env", []) if "value" in e}}
        cap = int(env.get("RAGSTREAM_PARSE_MEMORY_MB", defaults["parse_memory_mb"]))
        # the pool's size as the stage module computes it (agents/partition.pool_workers:
        # whole documents + page ranges at once), else stage_workers
        values = SimpleNamespace(**{name: type(default)(env.get(f"RAGSTREAM_{name.upper()}", default))
                                    for name, default in defaults.items()
                                    if isinstance(default, int) and not isinstance(default, bool)})
        sizing = getattr(importlib.import_module(f"agents.{stage}"), "pool_workers", None)
        workers = sizing(values) if sizing else values.stage_workers
        assert cap > 0, stage  # 0 = no cap: nothing would stop a parse before the pod's limit
        limit = _mebibytes(c["resources"]["limits"]["memory"])
        assert limit >= workers * cap + baseline, (stage, limit, workers, cap, baseline)


OCR_S_PER_PAGE_UNDER_LOAD = 4.0  # ../shared/DESIGN.md: one tesseract page, 31 s -> 4 s with OMP_THREAD_LIMIT=1


def _seconds(duration: str) -> float:
    """A compose duration such as "45s", "2m30s" in seconds."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts and duration, duration
    return int(parts.group(1) or 0) * 60 + int(parts.group(2) or 0)


def test_each_worker_outlives_its_shutdown_grace_and_partition_drains_the_longest_range():
    """Kubernetes and docker SIGKILL a container terminationGracePeriodSeconds /
    stop_grace_period after SIGTERM (docker's default: 10 s); the worker's own watchdog
    ends it RAGSTREAM_SHUTDOWN_GRACE_S after SIGTERM.  The platform's bound must come
    later, or a drain (tests/test_worker_drain.py) is killed mid-commit; and the
    partition worker's grace must hold the longest page range: the largest
    ``max_pages_per_task`` of any profile at the OCR pace under load."""
    from stages.profiles import DEFAULT_PROFILES

    longest_range_s = max(p.max_pages_per_task for p in DEFAULT_PROFILES.values()) * OCR_S_PER_PAGE_UNDER_LOAD
    default = Settings.model_fields["shutdown_grace_s"].default
    config = _config()
    for stage in STAGES:
        pod = _objects("Deployment")[f"ragstream-{stage}"]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
        grace = float(env.get("RAGSTREAM_SHUTDOWN_GRACE_S", config.get("RAGSTREAM_SHUTDOWN_GRACE_S", default)))
        assert pod["terminationGracePeriodSeconds"] >= grace + 10, (stage, grace)
        service = _compose()["services"][stage]
        compose_grace = float(service["environment"].get("RAGSTREAM_SHUTDOWN_GRACE_S", default))
        assert _seconds(service.get("stop_grace_period", "10s")) >= compose_grace + 10, (stage, compose_grace)
        if stage == "partition":
            assert min(grace, compose_grace) >= longest_range_s, (grace, compose_grace, longest_range_s)
