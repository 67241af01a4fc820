"""The deployment files in deploy/ (Containerfile, Kubernetes manifests, compose file, haproxy.cfg)
name what really exists: routes the app serves, ports the entry commands listen on, settings the
config reads, commands the CLI's own parser accepts. Docker and Kubernetes are not on this
machine, so this checks the files rather than running them; HAProxy checks its file itself."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.routing import Mount, Route

from wasm_runner.cli import SUBCOMMANDS
from wasm_runner.scaleout.launcher.children import require_binary
from wasm_runner.scaleout.launcher.haproxy import INTERNAL_HEADER_PREFIX, render_config
from wasm_runner.http.cli import _parser as serve_parser
from wasm_runner.settings import ServerConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
SECRET = "s" * 64


def _manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _one(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _container() -> dict[str, Any]:
    (container,) = _one("Deployment", "wasm-runner")["spec"]["template"]["spec"]["containers"]
    return container


def _app_paths() -> set[str]:
    """Every path the app serves, asked of the app itself."""
    from server import create_app

    app = create_app(ServerConfig(auth=False))
    paths = set()
    for route in app.routes:
        if isinstance(route, Route | Mount):
            paths.add(route.path)
    return paths


def _image_command() -> list[str]:
    """ENTRYPOINT + CMD of the Containerfile (both JSON arrays)."""
    text = (DEPLOY / "Containerfile").read_text()
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M).group(1))  # type: ignore[union-attr]
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))  # type: ignore[union-attr]
    return [*entry, *cmd]


def _serve_args(argv: list[str]) -> Any:
    """The arguments of a ``wasm-runner serve ...`` command, parsed by serve's own parser."""
    assert argv[0] == "serve" and "serve" in SUBCOMMANDS
    return serve_parser().parse_args(argv[1:])


def _deployment_env() -> dict[str, str]:
    """The container's environment as a pod would see it (secrets and the pod IP filled in)."""
    env = {}
    for item in _container()["env"]:
        if "value" in item:
            env[item["name"]] = item["value"].replace("$(POD_IP)", "10.0.0.5")
        elif item["valueFrom"].get("fieldRef"):
            env[item["name"]] = "10.0.0.5"
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == "wasm-runner"
            env[item["name"]] = {"api-keys": "site:" + "k" * 32, "cluster-secret": SECRET}[ref["key"]]
    return env


def test_every_file_parses_and_the_kustomization_lists_them() -> None:
    kinds = {d["kind"] for d in _manifests()}
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"} <= kinds
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    (generated,) = kustomization["configMapGenerator"]
    assert generated["files"] == ["server.toml=../server.toml"]
    assert (K8S / "../server.toml").resolve() == DEPLOY / "server.toml"
    assert yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    tomllib.loads((DEPLOY / "server.toml").read_text())


def test_the_image_entry_command_is_one_the_cli_accepts() -> None:
    argv = _image_command()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert argv[0] in scripts  # the installed console script
    args = _serve_args(argv[1:])
    assert args.host == "0.0.0.0" and args.port == 8000
    # the config file it names is the one the image copies and the Deployment mounts
    text = (DEPLOY / "Containerfile").read_text()
    assert f"COPY deploy/server.toml {args.config}" in text
    (mount,) = _container()["volumeMounts"]
    assert str(Path(mount["mountPath"]) / "server.toml") == args.config
    # a Debian base, runtimes compiled at build by the non-root user that runs the server
    assert all("bookworm" in line for line in re.findall(r"^FROM .*$", text, re.M))
    user = text.index("\nUSER 10001:10001")
    assert text.index("\nRUN wasm-runner warm") > user
    assert "USER root" not in text and "USER 0" not in text


def test_probes_name_real_endpoints_on_the_served_port() -> None:
    paths = _app_paths()
    container = _container()
    ready, live = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert ready["path"] == "/readyz" and live["path"] == "/healthz"
    assert {ready["path"], live["path"]} <= paths
    (port,) = container["ports"]
    assert ready["port"] == live["port"] == port["name"]
    assert port["containerPort"] == _serve_args(_image_command()[1:]).port
    service = _one("Service", "wasm-runner")
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert service["spec"]["sessionAffinity"] == "None"  # no stickiness: any replica answers


def test_the_manifests_settings_are_real_and_fit_together() -> None:
    env = _deployment_env()
    names = {n for n in env if n.startswith("WASM_RUNNER_")}
    assert names == {"WASM_RUNNER_ADVERTISE_URL", "WASM_RUNNER_REDIS_URL", "WASM_RUNNER_API_KEYS",
                     "WASM_RUNNER_CLUSTER_SECRET"}  # fmt: skip
    config = load_config(DEPLOY / "server.toml", env=env)
    # each variable reached the setting it names
    assert config.scale_out.redis_url == "redis://wasm-runner-redis:6379/0"
    assert config.scale_out.advertise_url == "http://10.0.0.5:8000"
    assert config.scale_out.cluster_secret == SECRET and [k.name for k in config.api_keys] == ["site"]
    # the Redis URL names the Redis Service and its port
    redis_service = _one("Service", "wasm-runner-redis")
    assert redis_service["spec"]["ports"][0]["port"] == 6379
    pod = _one("Deployment", "wasm-runner")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > config.scale_out.drain_seconds
    limit = _container()["resources"]["limits"]["memory"]
    assert limit.endswith("Gi") and int(limit[:-2]) * 1024 > config.admission.memory_budget_mb
    labels = _one("Deployment", "wasm-runner")["spec"]["template"]["metadata"]["labels"]
    assert _one("Service", "wasm-runner")["spec"]["selector"] == labels
    assert _one("PodDisruptionBudget", "wasm-runner")["spec"]["selector"]["matchLabels"] == labels
    target = _one("HorizontalPodAutoscaler", "wasm-runner")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "wasm-runner")


def test_the_network_policy_allows_no_egress_but_redis_dns_and_the_replicas() -> None:
    policy = _one("NetworkPolicy", "wasm-runner")["spec"]
    labels = _one("Deployment", "wasm-runner")["spec"]["template"]["metadata"]["labels"]
    redis_labels = _one("Deployment", "wasm-runner-redis")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"] == labels and "Egress" in policy["policyTypes"]
    allowed = set()
    for rule in policy["egress"]:
        assert rule.get("to") and rule.get("ports"), rule  # an empty `to` or no ports = anywhere
        for peer in rule["to"]:
            assert "ipBlock" not in peer, rule
        selector = rule["to"][0]["podSelector"]["matchLabels"]
        for port in rule["ports"]:
            allowed.add((tuple(sorted(selector.items())), port["port"], port["protocol"]))
    redis_port = _one("Deployment", "wasm-runner-redis")["spec"]["template"]["spec"]["containers"][0]
    assert redis_port["ports"][0]["containerPort"] == 6379
    assert allowed == {
        (tuple(sorted(redis_labels.items())), 6379, "TCP"),  # Redis
        (tuple(sorted(labels.items())), 8000, "TCP"),  # the other replicas: the session hop
        ((("k8s-app", "kube-dns"),), 53, "UDP"),  # DNS: the Redis URL names a Service
        ((("k8s-app", "kube-dns"),), 53, "TCP"),
    }
    # Redis itself takes connections only from the replicas and reaches nothing
    redis_policy = _one("NetworkPolicy", "wasm-runner-redis")["spec"]
    assert redis_policy["egress"] == [] and "Egress" in redis_policy["policyTypes"]
    assert redis_policy["ingress"][0]["from"][0]["podSelector"]["matchLabels"] == labels


def test_the_compose_file_runs_three_replicas_the_cli_accepts_behind_its_haproxy() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    replicas = sorted(n for n in compose if n.startswith("replica"))
    assert replicas == ["replica1", "replica2", "replica3"] and {"redis", "haproxy"} <= set(compose)
    entry = _image_command()[0]
    ports = {}
    for name in replicas:
        service = compose[name]
        assert service["build"]["dockerfile"] == "deploy/Containerfile"
        args = _serve_args(service["command"])  # after the image's ENTRYPOINT, wasm-runner
        assert entry == "wasm-runner" and args.advertise_url == f"http://{name}:{args.port}"
        assert args.config == _serve_args(_image_command()[1:]).config
        env = {k: "site:" + "k" * 32 if k.endswith("API_KEYS") else SECRET if k.endswith("SECRET") else v
               for k, v in service["environment"].items()}  # fmt: skip
        config = load_config(DEPLOY / "server.toml", env=env, advertise_url=args.advertise_url)
        assert config.scale_out.redis_url == "redis://redis:6379/0" and config.scale_out.cluster_secret == SECRET
        grace = int(service["stop_grace_period"].rstrip("s"))
        assert grace > config.scale_out.drain_seconds
        ports[name] = args.port
    (volume,) = compose["haproxy"]["volumes"]
    assert volume.split(":")[0] == "./haproxy.cfg"
    cfg = (DEPLOY / "haproxy.cfg").read_text()
    servers = dict(re.findall(r"^\s*server (\S+) (\S+) check", cfg, re.M))
    assert servers == {name: f"{name}:{port}" for name, port in ports.items()}
    assert re.search(r"option httpchk GET (\S+)", cfg).group(1) in _app_paths()  # type: ignore[union-attr]


def test_the_compose_haproxy_cfg_is_valid_and_keeps_the_clusters_rules() -> None:
    haproxy = require_binary("haproxy")
    check = subprocess.run([haproxy, "-c", "-f", str(DEPLOY / "haproxy.cfg")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    warnings = [line for line in check.stderr.splitlines() if "[WARNING]" in line]
    # the only warnings: compose's service names do not resolve on this machine
    assert all("could not resolve address 'replica" in w for w in warnings), warnings
    # every rule of the configuration `wasm-runner cluster` generates (for the same settings) is
    # in the compose file's too, but for the lines that differ by nature (addresses, sockets)
    config = load_config(DEPLOY / "server.toml", env={})
    generated = render_config("127.0.0.1", 8000, [("r1", 8001)], config).splitlines()
    differs = ("#", "bind ", "server ", "stats socket", "default-server", "http-check send")
    expected = {line.strip() for line in generated if line.strip() and not line.strip().startswith(differs)}
    present = {line.strip() for line in (DEPLOY / "haproxy.cfg").read_text().splitlines()}
    assert expected - present == set()
    assert f"http-request del-header {INTERNAL_HEADER_PREFIX} -m beg" in present


@pytest.mark.parametrize("path", ["compose.yaml", "haproxy.cfg", "server.toml", "Containerfile"])
def test_no_secret_or_machine_path_is_committed(path: str) -> None:
    text = (DEPLOY / path).read_text()
    assert not re.search(r"/(work|root)/", text)
    assert not re.search(r"(?i)(api_keys|cluster_secret)\s*=\s*\"", text)
    assert "127.0.0.1" in text or "localhost" in text or path == "Containerfile"
