"""The dashboard and the alert rules, checked against a real Prometheus scraping a live API and worker.

Every dashboard query and every rule must parse and return series from what tenk exports under a little
load; a query that reads a metric no tenk process exports fails, naming the metric.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.clients import AUTH
from harness.stack import Stack
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tenk.stack import free_port, wait_http_ok
from tests.deploy.promql import (
    DASHBOARD,
    RULES,
    Prometheus,
    dashboard_queries,
    exported_samples,
    rule_expressions,
    run_prometheus,
    unexported,
)
from tests.ingest.streams import event
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually_blocking
from tests.support.workers import SpawnWorker

PROMETHEUS = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus is not installed (`make system-deps` installs Debian's)"
)


def _load(base_url: str, stop: threading.Event) -> None:
    """A little of every kind of traffic the dashboard shows, until stopped."""
    with httpx.Client(base_url=base_url, timeout=10) as http:
        n = 0
        while not stop.is_set():
            n += 1
            http.get(f"/products/{1 + n % 50}")
            http.get("/products/99999999")
            http.get("/tasks", params={"limit": 5})
            http.get("/quotes/AAPL")
            http.get("/search", params={"q": "lamp", "limit": 3})
            http.post("/events", json=event("deploy-test"), headers=AUTH)
            stop.wait(0.02)


@pytest.fixture
def live(
    stack: Stack, spawn_api: Any, spawn_worker: SpawnWorker, mock: MockUpstreamProcess, tmp_path: Path
) -> Iterator[tuple[Prometheus, str]]:
    """Prometheus scraping one `tenk serve` and one `tenk worker` under load; yields it and their /metrics."""
    assert PROMETHEUS is not None
    api: ServerProcess = spawn_api(stack, server="granian", TENK_UPSTREAM_URL=mock.url)
    worker_port = free_port()
    worker = spawn_worker(stack, "deploy-worker", TENK_INGEST_METRICS_PORT=str(worker_port))
    worker_url = f"http://127.0.0.1:{worker_port}"
    wait_http_ok(worker_url + "/metrics", 30, worker.process)
    stop = threading.Event()
    loader = threading.Thread(target=_load, args=(api.base_url, stop), daemon=True)
    loader.start()
    jobs = {"tenk-api": [api.base_url.removeprefix("http://")], "tenk-worker": [worker_url.removeprefix("http://")]}
    try:
        with run_prometheus(PROMETHEUS, tmp_path, jobs) as prometheus:
            yield prometheus, httpx.get(api.base_url + "/metrics").text + httpx.get(worker_url + "/metrics").text
    finally:
        stop.set()
        loader.join(30)


def _empty_or_failing(prometheus: Prometheus, queries: dict[str, str]) -> dict[str, str]:
    problems = {}
    for name, expr in queries.items():
        answer = prometheus.query(expr)
        if answer.get("status") != "success":
            problems[name] = f"{answer.get('errorType')}: {answer.get('error')} in {expr}"
        elif not answer["data"]["result"]:
            problems[name] = f"no series: {expr}"
    return problems


@pytest.mark.slow
@needs_prometheus
def test_every_dashboard_query_and_rule_returns_series_from_live_tenk(live: tuple[Prometheus, str]) -> None:
    prometheus, metrics_text = live
    panels = dashboard_queries()
    records, alerts = rule_expressions()
    exported = exported_samples(metrics_text)

    assert unexported(panels, exported) == {}, "dashboard panels read metrics tenk does not export"
    assert unexported({**records, **alerts}, exported) == {}, "rules read metrics tenk does not export"

    signals = {**panels, **{name: name for name in records}, **{f"{n} (recording)": e for n, e in records.items()}}
    # Rates need two scrapes, and recorded series an evaluation.
    problems: dict[str, str] = {}

    def all_return_series() -> bool:
        problems.clear()
        problems.update(_empty_or_failing(prometheus, signals))
        return not problems

    eventually_blocking(all_return_series, 90, lambda: f"every query to return series: {problems}", every=1)

    # Alert expressions return series only while firing; Prometheus must have evaluated each without error.
    def rules_once_alerts_evaluated() -> dict[str, dict[str, Any]] | None:
        rules = {rule["name"]: rule for rule in prometheus.rules()}
        # An unevaluated rule reports Go's zero time, 0001-01-01.
        evaluated = all(not rules.get(name, {}).get("lastEvaluation", "0001").startswith("0001") for name in alerts)
        return rules if evaluated else None

    rules = eventually_blocking(rules_once_alerts_evaluated, 60, "Prometheus to evaluate every alert rule", every=1)
    assert set(alerts) | set(records) <= set(rules)
    assert {name: rule.get("lastError") for name, rule in rules.items() if rule["health"] != "ok"} == {}
    for name, expr in alerts.items():
        assert prometheus.query(expr)["status"] == "success", name


@pytest.mark.slow
@needs_prometheus
def test_a_panel_reading_a_metric_tenk_does_not_export_is_caught(live: tuple[Prometheus, str]) -> None:
    prometheus, metrics_text = live
    made_up = {"ghost panel / A": "sum(rate(tenk_ghost_requests_total[10s]))"}
    assert unexported(made_up, exported_samples(metrics_text)) == {"ghost panel / A": {"tenk_ghost_requests_total"}}
    assert _empty_or_failing(prometheus, made_up) == {"ghost panel / A": f"no series: {made_up['ghost panel / A']}"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool comes with Debian's prometheus package")
def test_alert_rules_pass_promtool() -> None:
    result = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_covers_every_signal_the_issue_names() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in panels)
    exprs = " ".join(target["expr"] for panel in panels for target in panel["targets"])
    for signal in (
        "sum by (route)",  # RED per route template
        'tenk_cache_lookups_total{result="hit"}',  # hit ratio
        "tenk_pool_connections",
        "tenk_breaker_state",
        "tenk_upstream_inflight",
        "tenk_upstream_rejections_total",
        "tenk_ingest_backlog",
        "tenk_ingest_rows_written_total",
        "tenk_ingest_dead_letters_total",
    ):
        assert signal in exprs, signal
