"""Prometheus and Grafana in deploy/k8s/monitoring/, validated offline (the schemas of
every object: tests/test_k8s_manifests.py, which loads every file kustomization.yaml
lists):

- the ConfigMaps in generated.yaml are the files compose mounts (the alert rules, the
  Grafana provisioning and dashboards), byte for byte (render.py writes them);
- each scrape job, its relabelling applied to every pod the manifests make, selects
  exactly the pods and port it is meant to: every stage worker on
  RAGSTREAM_METRICS_PORT, the API's HTTP port, Triton's metrics port;
- the rules, the configuration and the dashboards are mounted where the configuration
  and the provisioning read them, and Prometheus may list the pods it discovers.
"""
from __future__ import annotations

import copy
import fnmatch
import importlib.util
import re

import yaml

from streams.app import STAGES
from tests.conftest import ROOT
from tests.test_k8s_manifests import K8S, _config, _objects

MONITORING = K8S / "monitoring"


def _render_module():
    spec = importlib.util.spec_from_file_location("render_monitoring", MONITORING / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prometheus_config() -> dict:
    return yaml.safe_load(_objects("ConfigMap")["prometheus-config"]["data"]["prometheus.yml"])


def _pod_spec(name: str) -> dict:
    return _objects("Deployment")[name]["spec"]["template"]["spec"]


def _mounts(name: str) -> dict[str, str]:
    """``{ConfigMap name: mount path}`` of Deployment ``name``'s container."""
    pod = _pod_spec(name)
    (c,) = pod["containers"]
    by_volume = {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    return {by_volume[m["name"]]: m["mountPath"] for m in c["volumeMounts"] if m["name"] in by_volume}


# ---------------------------------------------------------------- service discovery

def _pod_targets() -> list[dict[str, str]]:
    """The label sets Prometheus' pod discovery gives for the manifests' pods: one per
    container port, with the pod's labels as ``__meta_kubernetes_pod_label_*``
    (non-alphanumerics made ``_``, as Prometheus does)."""
    targets = []
    for name, dep in _objects("Deployment").items():
        template = dep["spec"]["template"]
        labels = {"__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
                  for k, v in template["metadata"]["labels"].items()}
        for c in template["spec"]["containers"]:
            for port in c.get("ports", []):
                targets.append({**labels, "deployment": name,
                                "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                                "__meta_kubernetes_pod_container_port_number": str(port["containerPort"])})
    return targets


def _selected(job: dict) -> set[tuple[str, int]]:
    """``{(Deployment, port)}`` that ``job``'s ``keep``/``drop`` relabel rules let
    through (a rule's regex must match the joined source labels in full)."""
    out = set()
    for target in _pod_targets():
        kept = True
        for rule in job.get("relabel_configs", []):
            action = rule.get("action", "replace")
            if action not in ("keep", "drop"):
                continue
            value = rule.get("separator", ";").join(target.get(s, "") for s in rule["source_labels"])
            matched = re.fullmatch(rule.get("regex", "(.*)"), value) is not None
            kept = kept and (matched if action == "keep" else not matched)
        if kept:
            out.add((target["deployment"], int(target["__meta_kubernetes_pod_container_port_number"])))
    return out


def _expected_targets() -> dict[str, set[tuple[str, int]]]:
    cfg = _config()
    api_args = _pod_spec("ragstream-api")["containers"][0]["args"]
    return {
        "ragstream-workers": {(f"ragstream-{s}", int(cfg["RAGSTREAM_METRICS_PORT"])) for s in STAGES},
        "ragstream-api": {("ragstream-api", int(api_args[api_args.index("--port") + 1]))},
        "triton": {("triton", int(cfg["RAGSTREAM_TRITON_METRICS_PORT"]))},
    }


def test_each_scrape_job_selects_exactly_its_pods_and_port():
    jobs = {j["job_name"]: j for j in _prometheus_config()["scrape_configs"]}
    compose_jobs = {j["job_name"] for j in yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
                    ["scrape_configs"]}
    # the alert rules name jobs (up{job="ragstream-workers"}): the same names as compose's
    assert set(jobs) == compose_jobs == set(_expected_targets())
    for name, expected in _expected_targets().items():
        (sd,) = jobs[name]["kubernetes_sd_configs"]
        assert sd == {"role": "pod", "namespaces": {"own_namespace": True}}, name
        assert _selected(jobs[name]) == expected, name


def test_the_selection_check_catches_a_wrong_selector():
    jobs = {j["job_name"]: j for j in _prometheus_config()["scrape_configs"]}
    broken = copy.deepcopy(jobs["ragstream-workers"])
    broken["relabel_configs"][0]["regex"] = "workers"  # the label value is "worker"
    assert _selected(broken) == set()
    broken = copy.deepcopy(jobs["triton"])
    broken["relabel_configs"][1]["regex"] = "http"  # Triton's HTTP port, not its metrics
    assert _selected(broken) == {("triton", 8000)} != _expected_targets()["triton"]


def test_prometheus_may_list_the_pods_it_discovers():
    (binding,) = _objects("RoleBinding").values()
    role = _objects("Role")[binding["roleRef"]["name"]]
    assert binding["roleRef"]["kind"] == "Role"
    assert {"name": _pod_spec("prometheus")["serviceAccountName"], "kind": "ServiceAccount"} in binding["subjects"]
    pods = [r for r in role["rules"] if "pods" in r["resources"] and r["apiGroups"] == [""]]
    assert pods and {"list", "watch"} <= set(pods[0]["verbs"])


def test_prometheus_reads_its_configuration_and_the_alert_rules():
    (c,) = _pod_spec("prometheus")["containers"]
    mounts = _mounts("prometheus")
    config_mount = next(m for m in c["volumeMounts"] if m.get("subPath") == "prometheus.yml")
    assert f"--config.file={config_mount['mountPath']}" in c["args"]
    (pattern,) = _prometheus_config()["rule_files"]
    rules = _objects("ConfigMap")["prometheus-rules"]["data"]
    assert [k for k in rules if fnmatch.fnmatch(f"{mounts['prometheus-rules']}/{k}", pattern)] == list(rules)
    assert yaml.safe_load(rules["rules.yml"])["groups"]


# ---------------------------------------------------------------- copies, Grafana

def test_generated_configmaps_are_the_files_compose_mounts():
    render = _render_module()
    on_disk = list(yaml.safe_load_all((MONITORING / "generated.yaml").read_text()))
    assert on_disk == render.config_maps(), "run: python deploy/k8s/monitoring/render.py"
    listed = _objects("ConfigMap")  # kustomization.yaml lists generated.yaml
    assert all(listed[m["metadata"]["name"]]["data"] == m["data"] for m in on_disk)
    names = {m["metadata"]["name"]: m["data"] for m in on_disk}
    assert names["prometheus-rules"]["rules.yml"] == (ROOT / "deploy" / "prometheus-rules.yml").read_text()
    assert "ragstream.json" in names["grafana-dashboards"]


def test_grafana_is_provisioned_from_the_configmaps_with_the_cluster_prometheus():
    maps = {m["metadata"]["name"]: m["data"] for m in _objects("ConfigMap").values()}
    mounts = _mounts("grafana")
    assert mounts["grafana-datasources"] == "/etc/grafana/provisioning/datasources"
    assert mounts["grafana-dashboard-providers"] == "/etc/grafana/provisioning/dashboards"
    (provider,) = yaml.safe_load(maps["grafana-dashboard-providers"]["ragstream.yaml"])["providers"]
    assert provider["options"]["path"] == mounts["grafana-dashboards"]
    (ds,) = yaml.safe_load(maps["grafana-datasources"]["prometheus.yaml"])["datasources"]
    service = _objects("Service")["prometheus"]
    (port,) = service["spec"]["ports"]
    assert ds["url"] == f"http://{service['metadata']['name']}:{port['port']}"
    (c,) = _pod_spec("grafana")["containers"]
    secret = _objects("Secret")["grafana-admin"]["stringData"]
    assert all(e["valueFrom"]["secretKeyRef"]["key"] in secret for e in c["env"])


# ---------------------------------------------------------------- Alertmanager

def _alertmanager_config() -> dict:
    return yaml.safe_load((ROOT / "deploy" / "alertmanager.yml").read_text())


def _receivers_of(route: dict) -> list[str]:
    return [route["receiver"]] * ("receiver" in route) + [
        r for child in route.get("routes", []) for r in _receivers_of(child)]


def test_both_prometheus_configurations_send_alerts_to_the_alertmanager_service():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    (k8s_port,) = _objects("Service")["alertmanager"]["spec"]["ports"]
    for config, where in ((_prometheus_config(), "k8s"),
                          (yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text()), "compose")):
        (am,) = config["alerting"]["alertmanagers"]
        (static,) = am["static_configs"]
        assert static["targets"] == [f"alertmanager:{k8s_port['port']}"], where
    assert "9093:9093" in compose["alertmanager"]["ports"]
    (c,) = _pod_spec("alertmanager")["containers"]
    assert k8s_port["targetPort"] in {p["name"] for p in c["ports"]}


def test_every_alert_reaches_a_receiver_with_its_url_where_the_secret_is_mounted():
    config = _alertmanager_config()
    receivers = {r["name"]: r for r in config["receivers"]}
    assert set(_receivers_of(config["route"])) <= set(receivers)
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus-rules.yml").read_text())
    severities = {r["labels"]["severity"] for g in rules["groups"] for r in g["rules"]}
    assert severities == {"critical", "warning"}  # the routes below name these two
    assert any('severity="critical"' in r.get("matchers", []) for r in config["route"]["routes"])
    (hook,) = receivers[config["route"]["receiver"]]["webhook_configs"]
    url_file = hook["url_file"]
    # Kubernetes: the Secret's key, mounted as that file
    pod = _pod_spec("alertmanager")
    (c,) = pod["containers"]
    secret_volume = next(v for v in pod["volumes"] if "secret" in v)
    mount = next(m for m in c["volumeMounts"] if m["name"] == secret_volume["name"])
    (item,) = secret_volume["secret"]["items"]
    assert f"{mount['mountPath']}/{item['path']}" == url_file
    assert item["key"] in _objects("Secret")[secret_volume["secret"]["secretName"]]["stringData"]
    # compose: a file bind-mounted there, by default the example (which must exist)
    volumes = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["alertmanager"]["volumes"]
    (source,) = [v.rsplit(":", 2)[0] for v in volumes if v.rsplit(":", 2)[1] == url_file]
    default = re.fullmatch(r"\$\{RAGSTREAM_ALERT_WEBHOOK_URL_FILE:-(.+)\}", source).group(1)
    assert (ROOT / default).is_file()
    # the configuration Alertmanager reads is the rendered copy of deploy/alertmanager.yml
    assert _mounts("alertmanager")["alertmanager-config"] == "/etc/alertmanager/alertmanager.yml"
    assert "--config.file=/etc/alertmanager/alertmanager.yml" in c["args"]
