"""TENK_METRICS_PORT: /metrics leaves the traffic port for a port of its own, on a real `tenk serve`."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from harness.clients import AUTH
from harness.stack import Stack
from tenk.stack import free_port
from tests.support.servers import ServerProcess


def test_metrics_move_to_their_own_port_and_leave_the_traffic_port(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    metrics_port = free_port()
    api = spawn_api(stack, server="granian", workers=2, TENK_METRICS_PORT=str(metrics_port))
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    with httpx.Client(timeout=10) as http:
        assert http.get(f"{api.base_url}/products/1").status_code == 200
        assert http.get(f"{api.base_url}/metrics").status_code == 404
        scraped = http.get(metrics_url)
        assert scraped.status_code == 200, api.log_tail()
        assert "tenk_http_request_duration_seconds" in scraped.text
        assert http.get(f"http://127.0.0.1:{metrics_port}/products/1").status_code == 404


def test_the_metrics_port_asks_for_a_key_when_metrics_need_one(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    metrics_port = free_port()
    spawn_api(stack, TENK_METRICS_PORT=str(metrics_port), TENK_AUTH_METRICS="true")
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    with httpx.Client(timeout=10) as http:
        refused = http.get(metrics_url)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert http.get(metrics_url, headers={"Authorization": "Bearer nope"}).status_code == 403
        assert http.get(metrics_url, headers=AUTH).status_code == 200
