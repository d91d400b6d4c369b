"""The shipped nginx (`deploy/nginx/nginx.conf`) in front of a real `tenk serve`: what it passes on, what it
refuses itself, and who tenk takes its clients to be."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest
import yaml

from harness.stack import Stack
from tests.deploy.nginx import LocalNginx, nginx_in_front
from tests.deploy.test_compose import COMPOSE
from tests.search.budgets import BUDGET_ENV, client_from, search, spend_budget
from tests.support.servers import ServerProcess

SpawnApi = Callable[..., ServerProcess]


@contextmanager
def _behind_nginx(stack: Stack, spawn_api: SpawnApi, **env: str) -> Iterator[tuple[ServerProcess, LocalNginx]]:
    """A `tenk serve` as compose runs it (granian), and the shipped nginx in front of it."""
    api = spawn_api(stack, "granian", **env)
    with nginx_in_front([api.base_url.removeprefix("http://")]) as nginx:
        yield api, nginx


def test_nginx_refuses_a_path_with_a_control_character_in_tenks_own_words(stack: Stack, spawn_api: SpawnApi) -> None:
    with _behind_nginx(stack, spawn_api) as (api, nginx), httpx.Client(timeout=30) as http:
        passed_on = http.get(f"{nginx.base_url}/products/1")
        assert passed_on.status_code == 200, passed_on.text
        assert "x-request-id" in passed_on.headers  # tenk echoes the id nginx sends it
        for path in ("/metrics%0A", "/products/1%0A", "/events%0D", "/tasks%09", "/metrics%7F", "/metrics%C2%85"):
            refused, direct = http.get(nginx.base_url + path), http.get(api.base_url + path)
            assert refused.status_code == direct.status_code == 400, (path, refused.text)
            assert refused.content == direct.content, path  # the same error body, naming `path`
            assert refused.headers["content-type"] == "application/json", path
            assert "x-request-id" not in refused.headers, f"{path} reached tenk: nginx passed it on"
        # NUL nginx refuses on its own, before any location.
        assert http.get(f"{nginx.base_url}/tasks%00").status_code == 400


@pytest.mark.parametrize("hot_lane", [True, False])
def test_behind_nginx_each_client_has_its_own_search_budget_and_a_forged_header_buys_none(
    stack: Stack, spawn_api: SpawnApi, hot_lane: bool
) -> None:
    # Compose's own trusted networks, and loopback, where nginx reaches the API here. The clients come from
    # other loopback addresses, outside both.
    compose_api = yaml.safe_load(COMPOSE.read_text())["x-api"]["environment"]
    trusted = f"{compose_api['TENK_TRUSTED_PROXIES']},127.0.0.1/32"
    env = {"TENK_TRUSTED_PROXIES": trusted, "TENK_HOT_LANE": str(hot_lane).lower(), **BUDGET_ENV}
    with (
        _behind_nginx(stack, spawn_api, **env) as (api, nginx),
        client_from("127.0.0.2", nginx.base_url) as one,
        client_from("127.0.0.3", nginx.base_url) as other,
        client_from("127.0.0.2", api.base_url) as one_on_the_api_port,
    ):
        spend_budget(one)
        assert search(other) == 200, "the clients behind nginx share one budget"
        # nginx replaces the header a client sends; on the API's own port, from an untrusted peer, it is ignored.
        assert search(one, "198.51.100.9") == 429
        assert search(one_on_the_api_port, "198.51.100.9") == 429
        spend_budget(other)
        assert search(other, "198.51.100.9") == 429
