"""The Kustomize base, validated against the Kubernetes OpenAPI schemas (kubernetes-validate ships them, so
this runs offline), and cross-checked against tenk: probes, ports, commands, variables, drain times."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from tenk.cli import main as tenk_cli
from tenk.ingest.settings import IngestSettings
from tenk.serving import server_argv
from tenk.settings_doc import env_names

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
STORES = K8S / "stores"
SECRET_EXAMPLE = K8S / "tenk-secrets.env.example"
# Settings that hold a password or a key: the Secret's, never a ConfigMap's.
SECRET_SETTINGS = {
    "TENK_DATABASE_URL",
    "TENK_DATABASE_DIRECT_URL",
    "TENK_DATABASE_REPLICA_URLS",
    "TENK_REDIS_URL",
    "TENK_API_KEYS",
    "TENK_CURSOR_SECRET",
}
KUBECTL = shutil.which("kubectl")
KUBERNETES_VERSION = "1.30.0"
# Kinds from the Prometheus operator: not in Kubernetes' schemas, checked by hand below.
OPERATOR_KINDS = {"ServiceMonitor"}


def _docs(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _base_files() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"] for doc in _docs((BASE / name).read_text())]


def _kustomize(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    result = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return _docs(result.stdout)


def _rendered() -> list[dict[str, Any]]:
    return _kustomize(BASE) if KUBECTL else _base_files()


def _by_kind(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def _validate(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if doc["kind"] in OPERATOR_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata'].get('name')}: {exc.message} at {list(exc.path)}")


def _container(docs: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    container: dict[str, Any] = _by_kind(docs, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]
    return container


def _drain_s() -> int:
    argv = server_argv("tenk.app:create_app", "granian", host="0.0.0.0", port=8000, workers=1)
    return int(argv[argv.index("--workers-kill-timeout") + 1])


def _migrate_job() -> dict[str, Any]:
    (job,) = _docs((K8S / "migrate-job.yaml").read_text())
    return job


def _store_policies() -> list[dict[str, Any]]:
    if KUBECTL:
        return _kustomize(STORES)
    kustomization = yaml.safe_load((STORES / "kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"] for doc in _docs((STORES / name).read_text())]


def _pod_specs() -> dict[str, dict[str, Any]]:
    """Every pod template tenk ships, by its pods' app.kubernetes.io/name."""
    templates = [d["spec"]["template"] for d in _rendered() if d["kind"] == "Deployment"]
    templates.append(_migrate_job()["spec"]["template"])
    return {t["metadata"]["labels"]["app.kubernetes.io/name"]: t["spec"] for t in templates}


def test_base_files_and_migrate_job_validate_against_kubernetes_schemas() -> None:
    _validate(_base_files())
    _validate([_migrate_job()])
    _validate(_store_policies())


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_base_and_example_overlay_render_with_kustomize_and_validate() -> None:
    base = _kustomize(BASE)
    assert {d["kind"] for d in base} >= {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "ConfigMap",
        "ServiceMonitor",
    }
    _validate(base)
    overlay = _kustomize(K8S / "overlays" / "example")
    _validate(overlay)
    assert _container(overlay, "tenk-api")["image"] == "registry.example.com/tenk:0.1.0"


def test_api_probes_ports_and_drain_match_tenk() -> None:
    docs = _rendered()
    api = _container(docs, "tenk-api")
    env = {item["name"]: item["value"] for item in api["env"]}
    (port,) = api["ports"]
    assert port["containerPort"] == int(env["TENK_PORT"])
    assert api["readinessProbe"]["httpGet"] == {"path": "/ready", "port": port["name"]}
    assert api["livenessProbe"]["httpGet"] == {"path": "/health", "port": port["name"]}
    service = _by_kind(docs, "Service", "tenk-api")
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    pod = _by_kind(docs, "Deployment", "tenk-api")["spec"]["template"]["spec"]
    pre_stop = api["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    # The endpoint is gone before SIGTERM, then granian's drain must fit in what is left of the grace.
    assert int(pre_stop[1]) + _drain_s() < pod["terminationGracePeriodSeconds"]
    worker_pod = _by_kind(docs, "Deployment", "tenk-worker")["spec"]["template"]["spec"]
    assert IngestSettings().shutdown_timeout_s < worker_pod["terminationGracePeriodSeconds"]


def test_hpa_pdb_and_service_monitor_select_what_exists() -> None:
    docs = _rendered()
    hpa = _by_kind(docs, "HorizontalPodAutoscaler", "tenk-api")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "tenk-api"
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    for name in ("tenk-api", "tenk-worker"):
        labels = _by_kind(docs, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        selector = _by_kind(docs, "PodDisruptionBudget", name)["spec"]["selector"]["matchLabels"]
        assert selector.items() <= labels.items()
        container = _container(docs, name)
        assert container["resources"]["requests"]["cpu"]
    monitor = _by_kind(docs, "ServiceMonitor", "tenk")
    services = [d for d in docs if d["kind"] == "Service"]
    selected = [
        s for s in services if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    assert {s["metadata"]["name"] for s in selected} == {"tenk-api", "tenk-worker"}
    port_names = {p["name"] for s in selected for p in s["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == port_names
    worker = _container(docs, "tenk-worker")
    worker_env = {item["name"]: item["value"] for item in worker["env"]}
    assert worker["ports"][0]["containerPort"] == int(worker_env["TENK_INGEST_METRICS_PORT"])
    assert worker_env["TENK_INGEST_METRICS_HOST"] == "0.0.0.0"


def test_every_command_and_variable_in_the_manifests_is_tenks() -> None:
    docs = [*_rendered(), _migrate_job()]
    known = set(env_names())
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            assert set(doc["data"]) - known == set()
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            assert {item["name"] for item in container.get("env", [])} - known == set()
            args = container["args"]
            command = tenk_cli.commands[args[0]]
            with command.make_context(args[0], list(args[1:])):
                pass


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_lab_plan_patch_applies_to_the_base_and_validates(results: Path, tmp_path: Path) -> None:
    out = CliRunner().invoke(
        tenk_cli, ["lab", "plan", "--rps", "20000", "--results", str(results), "--emit", "kustomize"]
    )
    assert out.exit_code == 0, out.output
    # Kustomize takes only relative roots: a copy of the base beside the overlay.
    shutil.copytree(BASE, tmp_path / "base")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "sizing.yaml").write_text(out.output)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["../base"], "patches": [{"path": "sizing.yaml"}]})
    )
    docs = _kustomize(overlay)
    _validate(docs)
    processes = int(re.search(r"api_processes: (\d+)", _plan_text(results)).group(1))  # type: ignore[union-attr]
    assert _by_kind(docs, "HorizontalPodAutoscaler", "tenk-api")["spec"]["minReplicas"] == processes
    assert _by_kind(docs, "Deployment", "tenk-api")["spec"]["replicas"] == processes
    assert _by_kind(docs, "ConfigMap", "tenk-config")["data"]["TENK_DATABASE_POOL_MAX"].isdigit()


def _plan_text(results: Path) -> str:
    return CliRunner().invoke(tenk_cli, ["lab", "plan", "--rps", "20000", "--results", str(results)]).output


def test_no_pod_is_given_a_service_account_token() -> None:
    specs = _pod_specs()
    assert set(specs) == {"tenk-api", "tenk-worker", "tenk-migrate"}
    for name, spec in specs.items():
        assert spec.get("automountServiceAccountToken") is False, name


def test_the_migrate_job_runs_under_the_apis_security_context() -> None:
    specs = _pod_specs()
    api, migrate = specs["tenk-api"], specs["tenk-migrate"]
    assert migrate["securityContext"] == api["securityContext"]
    (api_container,), (migrate_container,) = api["containers"], migrate["containers"]
    assert migrate_container["securityContext"] == api_container["securityContext"]
    # A read-only root needs the same writable /tmp.
    assert migrate_container["volumeMounts"] == api_container["volumeMounts"]
    assert migrate["volumes"] == api["volumes"]


def test_urls_and_secrets_live_in_the_secret_which_every_pod_reads() -> None:
    config_maps = [d for d in [*_rendered(), *_overlay_or_base()] if d["kind"] == "ConfigMap"]
    for config_map in config_maps:
        data = config_map["data"]
        assert SECRET_SETTINGS.isdisjoint(data), sorted(SECRET_SETTINGS & set(data))
        assert not any(re.search(r"://[^/@]*@", value) for value in data.values()), data
    # Another image than ours still gets no dev key and no per-pod cursor secret.
    assert _by_kind(_rendered(), "ConfigMap", "tenk-config")["data"]["TENK_DEV_FALLBACK"] == "false"
    for name, spec in _pod_specs().items():
        (container,) = spec["containers"]
        assert {"secretRef": {"name": "tenk-secrets"}} in container["envFrom"], name
    example = dict(
        line.split("=", 1) for line in SECRET_EXAMPLE.read_text().splitlines() if line and not line.startswith("#")
    )
    assert set(example) == {"TENK_DATABASE_URL", "TENK_REDIS_URL", "TENK_API_KEYS", "TENK_CURSOR_SECRET"}
    assert example["TENK_API_KEYS"] == example["TENK_CURSOR_SECRET"] == ""
    for url in (example["TENK_DATABASE_URL"], example["TENK_REDIS_URL"]):
        assert re.search(r"://[^/@]*:<password>@", url), url


def _overlay_or_base() -> list[dict[str, Any]]:
    return _kustomize(K8S / "overlays" / "example") if KUBECTL else _base_files()


def test_only_tenks_pods_may_reach_postgres_and_redis() -> None:
    policies = {p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]: p for p in _store_policies()}
    overlay = yaml.safe_load((K8S / "overlays" / "example" / "kustomization.yaml").read_text())
    stores_namespace = yaml.safe_load((STORES / "kustomization.yaml").read_text())["namespace"]
    example = SECRET_EXAMPLE.read_text()
    # Who reaches what: the API and the workers both stores; the migrate Job Postgres alone.
    expected = {
        "postgresql": ({"tenk-api", "tenk-worker", "tenk-migrate"}, "TENK_DATABASE_URL"),
        "redis": ({"tenk-api", "tenk-worker"}, "TENK_REDIS_URL"),
    }
    assert set(policies) == set(expected)
    pods = _pod_specs()
    for store, (clients, setting) in expected.items():
        spec = policies[store]["spec"]
        assert spec["policyTypes"] == ["Ingress"]
        url = re.search(rf"^{setting}=\S+@([\w.-]+):(\d+)/", example, re.M)
        assert url, setting
        assert url.group(1).split(".")[1] == stores_namespace
        admitted: set[str] = set()
        for rule in spec["ingress"]:
            for peer in rule["from"]:
                if "namespaceSelector" not in peer:
                    # The store's own pods, in its own namespace (replication, Sentinel).
                    assert peer == {"podSelector": spec["podSelector"]}, peer
                    continue
                assert peer["namespaceSelector"] == {
                    "matchLabels": {"kubernetes.io/metadata.name": overlay["namespace"]}
                }
                (expression,) = peer["podSelector"]["matchExpressions"]
                assert (expression["key"], expression["operator"]) == ("app.kubernetes.io/name", "In")
                admitted |= set(expression["values"])
                assert rule["ports"] == [{"protocol": "TCP", "port": int(url.group(2))}]
        assert admitted == clients, store
        assert admitted <= set(pods)
