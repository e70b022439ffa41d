"""What each ragstream container of docker-compose.yml and deploy/k8s would run, read
from the files as Docker Compose and Kubernetes read them (tests/test_compose_exercised.py).

A :class:`ServiceSpec` is one container of the ragstream image: its command line
(the service's entrypoint/command, or a Deployment's command/args, over the
Dockerfile's ENTRYPOINT and CMD), its environment exactly as given (the image's ENV,
then the service's ``environment``, or the pod's ``envFrom`` ConfigMaps and Secrets,
then its ``env`` entries), its named ports and what checks it: compose healthchecks,
Kubernetes startup/readiness/liveness probes, Prometheus scrapes
(deploy/prometheus.yml for compose, the ``prometheus.io/*`` annotations in
Kubernetes).  Nothing here is rewritten for this machine: that is
``tests/deploy_fleet.py``'s one table.

The infrastructure services (Kafka, PostgreSQL, MinIO, Milvus, Triton, ...) use other
images and are not specs: the test stack stands in for them.
"""
from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

APP_IMAGE = "ragstream"  # the repository name of the image the Dockerfile builds


@dataclass(frozen=True)
class Probe:
    """One check of a running container: ``kind`` "http" (GET ``path`` on container
    port ``port``: a number, or a name of the container's ports), "tcp" (``port``
    accepts a connection) or "exec" (``command`` exits 0 inside the container)."""

    what: str  # e.g. "readinessProbe", "healthcheck", "prometheus job ragstream-workers"
    kind: str
    port: int | str = 0
    path: str = ""
    command: tuple[str, ...] = ()


@dataclass
class ServiceSpec:
    """One ragstream container as compose or Kubernetes would start it."""

    source: str  # "compose" or "k8s"
    name: str  # the compose service, or "<Kind>/<name>" of the workload
    argv: list[str]  # argv[0] is the image's ENTRYPOINT program (``ragstream``)
    entrypoint: list[str]  # what a one-off command runs under (``docker compose run SVC ARGS``)
    env: dict[str, str]
    workdir: str  # the image's WORKDIR: the process's cwd in the container
    one_shot: bool = False  # compose restart "no", a Kubernetes Job: must exit 0
    ports: dict[str, int] = field(default_factory=dict)  # named container ports
    probes: list[Probe] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)  # volume mount paths (writable, empty)

    @property
    def label(self) -> str:
        """How failures name it: ``compose service normalize``, ``k8s Deployment/ragstream-api``."""
        return f"compose service {self.name}" if self.source == "compose" else f"k8s {self.name}"


@dataclass(frozen=True)
class Image:
    """What the Dockerfile gives every container of the image."""

    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]
    workdir: str


def _exec_form(value: str) -> list[str]:
    """A Dockerfile ENTRYPOINT/CMD: JSON exec form, or shell form (``/bin/sh -c``)."""
    value = value.strip()
    return json.loads(value) if value.startswith("[") else ["/bin/sh", "-c", value]


def read_dockerfile(path: Path) -> Image:
    """ENTRYPOINT, CMD, ENV and WORKDIR of the final stage of ``path``."""
    text = re.sub(r"\\\n", " ", path.read_text())
    entry: list[str] = []
    cmd: list[str] = []
    env: dict[str, str] = {}
    workdir = "/"
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        word = word.upper()
        if word == "FROM":  # a new stage starts from nothing of ours
            entry, cmd, env, workdir = [], [], {}, "/"
        elif word == "ENTRYPOINT":
            entry, cmd = _exec_form(rest), []  # a new ENTRYPOINT resets an inherited CMD
        elif word == "CMD":
            cmd = _exec_form(rest)
        elif word == "WORKDIR":
            workdir = str(Path(workdir, rest.strip()))
        elif word == "ENV":
            parts = shlex.split(rest)
            if parts and "=" not in parts[0]:  # legacy "ENV KEY value with spaces"
                env[parts[0]] = " ".join(parts[1:])
            else:
                env.update(p.split("=", 1) for p in parts)
    return Image(entry, cmd, env, workdir)


def _words(value) -> list[str] | None:
    """A compose command/entrypoint: a list, or a string split as a shell would."""
    if value is None:
        return None
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _compose_env(value) -> dict[str, str]:
    """``environment`` as a mapping or a list of ``KEY=VALUE``; values as strings
    (compose passes YAML numbers and booleans as their text; null = unset)."""
    if isinstance(value, list):
        value = dict(item.split("=", 1) if "=" in item else (item, None) for item in value)
    out = {}
    for key, v in (value or {}).items():
        if v is None:
            continue
        out[key] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def _healthcheck(check: dict | None) -> list[Probe]:
    """A compose healthcheck ``test``: CMD (exec) or CMD-SHELL (``/bin/sh -c``)."""
    test = (check or {}).get("test")
    if not test or (check or {}).get("disable") or test == ["NONE"]:
        return []
    if isinstance(test, str):
        return [Probe("healthcheck", "exec", command=("/bin/sh", "-c", test))]
    if test[0] == "CMD-SHELL":
        return [Probe("healthcheck", "exec", command=("/bin/sh", "-c", " ".join(test[1:])))]
    return [Probe("healthcheck", "exec", command=tuple(test[1:]))]


def _scrapes(prometheus: Path) -> dict[str, list[Probe]]:
    """Prometheus' static targets ``service:port`` -> an http probe of its metrics path."""
    out: dict[str, list[Probe]] = {}
    if not prometheus.is_file():
        return out
    for job in yaml.safe_load(prometheus.read_text()).get("scrape_configs", []):
        for group in job.get("static_configs", []):
            for target in group.get("targets", []):
                host, _, port = target.rpartition(":")
                out.setdefault(host, []).append(Probe(f"prometheus job {job['job_name']}", "http", int(port),
                                                      job.get("metrics_path", "/metrics")))
    return out


def compose_specs(root: Path) -> list[ServiceSpec]:
    """Every service of ``root/docker-compose.yml`` that runs the ragstream image."""
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())  # resolves anchors, << merges
    scrapes = _scrapes(root / "deploy" / "prometheus.yml")
    specs = []
    for name, svc in compose["services"].items():
        if svc.get("image", "").split(":")[0] != APP_IMAGE:
            continue
        if "env_file" in svc:
            raise ValueError(f"compose service {name}: env_file is not read by this test")
        build = svc.get("build", ".")
        context = root / (build if isinstance(build, str) else build.get("context", "."))
        image = read_dockerfile(context / ("Dockerfile" if isinstance(build, str)
                                           else build.get("dockerfile", "Dockerfile")))
        entry, command = _words(svc.get("entrypoint")), _words(svc.get("command"))
        # an entrypoint set by the service drops the image's CMD too (compose spec)
        runs = image.entrypoint if entry is None else entry
        argv = runs + (command if command is not None else (image.cmd if entry is None else []))
        probes = _healthcheck(svc.get("healthcheck")) + scrapes.get(name, [])
        for published in svc.get("ports", []):  # "HOST:CONTAINER": something must listen there
            probes.append(Probe(f"published port {published}", "tcp", int(str(published).split(":")[-1])))
        specs.append(ServiceSpec("compose", name, argv, runs,
                                 {**image.env, **_compose_env(svc.get("environment"))},
                                 image.workdir, one_shot=svc.get("restart") == "no", probes=probes))
    return specs


def _kustomized(k8s: Path) -> tuple[list[dict], dict[str, str]]:
    """The objects of every resource the kustomization lists, and its image renames
    (``name`` -> ``newName:newTag``)."""
    kz = yaml.safe_load((k8s / "kustomization.yaml").read_text())
    docs = [d for r in kz["resources"] for d in yaml.safe_load_all((k8s / r).read_text()) if d]
    images = {i["name"]: f"{i.get('newName', i['name'])}:{i.get('newTag', 'latest')}" for i in kz.get("images", [])}
    return docs, images


def _k8s_probe(what: str, probe: dict) -> Probe:
    if "httpGet" in probe:
        return Probe(what, "http", probe["httpGet"]["port"], probe["httpGet"].get("path", "/"))
    if "tcpSocket" in probe:
        return Probe(what, "tcp", probe["tcpSocket"]["port"])
    if "exec" in probe:
        return Probe(what, "exec", command=tuple(probe["exec"]["command"]))
    raise ValueError(f"{what}: a probe kind this test does not run: {sorted(probe)}")


def _expand(words: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' ``$(VAR)`` in command and args (``$$`` escapes; unknown names stay)."""
    def one(w: str) -> str:
        return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                      lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), w)
    return [one(w) for w in words]


def _pod_env(container: dict, image: Image, configmaps: dict, secrets: dict) -> dict[str, str]:
    """The image's ENV, then each envFrom source in order, then ``env`` (which wins)."""
    env = dict(image.env)
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            env.update({prefix + k: str(v) for k, v in configmaps[source["configMapRef"]["name"]].items()})
        if "secretRef" in source:
            env.update({prefix + k: v for k, v in secrets[source["secretRef"]["name"]].items()})
    for item in container.get("env", []):
        ref = item.get("valueFrom", {})
        if "value" in item:
            env[item["name"]] = _expand([str(item["value"])], env)[0]
        elif "configMapKeyRef" in ref:
            env[item["name"]] = str(configmaps[ref["configMapKeyRef"]["name"]][ref["configMapKeyRef"]["key"]])
        elif "secretKeyRef" in ref:
            env[item["name"]] = secrets[ref["secretKeyRef"]["name"]][ref["secretKeyRef"]["key"]]
        else:
            raise ValueError(f"env {item['name']}: a source this test does not read: {sorted(ref)}")
    return env


def k8s_specs(root: Path) -> list[ServiceSpec]:
    """Every container of the ragstream image in a Deployment, StatefulSet or Job
    that ``kubectl apply -k root/deploy/k8s`` would create."""
    docs, images = _kustomized(root / "deploy" / "k8s")
    image = read_dockerfile(root / "Dockerfile")
    app_image = images.get(APP_IMAGE, APP_IMAGE).split(":")[0]
    configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    secrets = {d["metadata"]["name"]: {**{k: base64.b64decode(v).decode() for k, v in d.get("data", {}).items()},
                                       **{k: str(v) for k, v in d.get("stringData", {}).items()}}
               for d in docs if d["kind"] == "Secret"}
    specs = []
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        pod = doc["spec"]["template"]
        notes = pod.get("metadata", {}).get("annotations", {})
        for c in pod["spec"]["containers"]:
            repo = c["image"].split(":")[0]
            if images.get(repo, c["image"]).split(":")[0] != app_image:
                continue
            env = _pod_env(c, image, configmaps, secrets)
            command, args = c.get("command"), c.get("args")
            # Kubernetes: command replaces ENTRYPOINT (and drops CMD), args replace CMD
            entry = _expand(command if command is not None else image.entrypoint, env)
            argv = entry + _expand(args if args is not None else (image.cmd if command is None else []), env)
            probes = [_k8s_probe(kind, c[kind]) for kind in ("startupProbe", "readinessProbe", "livenessProbe")
                      if kind in c]
            if str(notes.get("prometheus.io/scrape", "")).lower() == "true":
                probes.append(Probe("prometheus.io annotations", "http", int(notes["prometheus.io/port"]),
                                    notes.get("prometheus.io/path", "/metrics")))
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", []) if "name" in p}
            name = f"{doc['kind']}/{doc['metadata']['name']}"
            specs.append(ServiceSpec("k8s", name, argv, entry, env, c.get("workingDir", image.workdir),
                                     one_shot=doc["kind"] == "Job", ports=ports, probes=probes,
                                     mounts=[m["mountPath"] for m in c.get("volumeMounts", [])]))
    return specs
