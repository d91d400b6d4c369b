"""Reading the PromQL that the dashboard and the alert rules hold, and a Prometheus started for a test."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tenk.stack import free_port
from tests.support.waiting import eventually_blocking

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "tenk.json"
RULES = DEPLOY / "prometheus" / "rules" / "tenk.yml"

# Grafana fills these in; Prometheus needs real durations. 1 s scrapes make 10 s windows hold several samples.
GRAFANA_VARIABLES = {"$__rate_interval": "10s", "$__interval": "1s", "$__range": "1m"}
_METRIC = re.compile(r"\b(tenk_[a-z0-9_]+)\b")


def dashboard_queries(path: Path = DASHBOARD) -> dict[str, str]:
    """Every panel target's expression, by "panel title / refId", with Grafana's variables filled in."""
    queries = {}
    for panel in json.loads(path.read_text())["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            queries[f"{panel['title']} / {target['refId']}"] = expr
    return queries


def rule_expressions(path: Path = RULES) -> tuple[dict[str, str], dict[str, str]]:
    """(recording rules by the series they record, alerts by name)."""
    records, alerts = {}, {}
    for group in yaml.safe_load(path.read_text())["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                records[rule["record"]] = rule["expr"]
            else:
                alerts[rule["alert"]] = rule["expr"]
    return records, alerts


def metrics_named(expr: str) -> set[str]:
    """The tenk sample names an expression reads (recorded `tenk:` series are not exported, so not here)."""
    return set(_METRIC.findall(expr))


def exported_samples(metrics_text: str) -> set[str]:
    return {line.split("{", 1)[0].split(" ", 1)[0] for line in metrics_text.splitlines() if line and line[0] != "#"}


def unexported(queries: dict[str, str], exported: set[str]) -> dict[str, set[str]]:
    """Queries that read a metric no tenk process exports, with the names it lacks."""
    missing = {name: metrics_named(expr) - exported for name, expr in queries.items()}
    return {name: names for name, names in missing.items() if names}


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def query(self, expr: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body: dict[str, Any] = response.json()
        return body

    def rules(self) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.url}/api/v1/rules", timeout=10).json()
        return [rule for group in body["data"]["groups"] for rule in group["rules"]]


@contextmanager
def run_prometheus(binary: str, workdir: Path, jobs: dict[str, list[str]], rules: Path = RULES) -> Iterator[Prometheus]:
    """Prometheus on a free loopback port, scraping `jobs` (name -> host:port targets) every second."""
    scrape = [{"job_name": job, "static_configs": [{"targets": targets}]} for job, targets in jobs.items()]
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": scrape,
    }
    # The rules' groups evaluate every 15 s in production; a test cannot wait for that.
    fast_rules = workdir / "rules.yml"
    groups = yaml.safe_load(rules.read_text())["groups"]
    for group in groups:
        group["interval"] = "1s"
    fast_rules.write_text(yaml.safe_dump({"groups": groups}))
    config["rule_files"] = [str(fast_rules)]
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prometheus = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:

        def ready() -> bool:
            assert process.poll() is None, f"prometheus exited: {log.read_text()[-2000:]}"
            try:
                return httpx.get(f"{prometheus.url}/-/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        eventually_blocking(ready, 60, lambda: f"prometheus to be ready: {log.read_text()[-2000:]}", every=0.2)
        yield prometheus
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
