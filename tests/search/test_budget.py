"""An anonymous client's searches have a budget of Postgres statements; cached pages and key holders are free."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from harness.clients import AUTH
from harness.stack import Stack
from tenk.search.budget import ClientBudget, SearchBudgetError, SharedTime, client_key
from tenk.settings import Settings
from tests.search.budgets import BUDGET_ENV, client_from, search, spend_budget
from tests.search.test_cache import SteppedClock
from tests.support.servers import ServerProcess


def test_a_client_past_its_burst_is_refused_until_tokens_come_back() -> None:
    clock = SteppedClock()
    budget = ClientBudget(rate=2.0, burst=3, clock=clock)
    for _ in range(3):
        budget.charge("198.51.100.7")
    with pytest.raises(SearchBudgetError) as refused:
        budget.charge("198.51.100.7")
    assert refused.value.status == 429
    assert refused.value.retry_after_s == 1
    budget.charge("198.51.100.8")  # another client has its own bucket
    clock.now += 0.5  # one token back at 2 a second
    budget.charge("198.51.100.7")
    with pytest.raises(SearchBudgetError):
        budget.charge("198.51.100.7")
    for _ in range(100):
        budget.charge(None)  # a caller with an API key is not counted


def test_anonymous_searches_share_a_budget_of_postgres_time_that_comes_back_at_its_share() -> None:
    clock = SteppedClock()
    shared = SharedTime(share=0.5, clock=clock)
    shared.admit()
    shared.spend(1.0)  # half a second overdrawn: statements in flight may all finish past the budget
    with pytest.raises(SearchBudgetError) as refused:
        shared.admit()
    assert refused.value.retry_after_s == 1
    clock.now += 0.9  # 0.45 s back: still overdrawn
    with pytest.raises(SearchBudgetError):
        shared.admit()
    clock.now += 0.2
    shared.admit()
    clock.now += 3600
    shared.spend(0.5)  # it never holds more than one second's worth
    with pytest.raises(SearchBudgetError):
        shared.admit()


def test_ipv6_clients_are_counted_by_their_64_block() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("203.0.113.9") == "203.0.113.9"


async def test_past_its_budget_an_anonymous_client_gets_429_with_retry_after_but_cached_pages_still_answer(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    # Five statements, and (at one a thousand seconds) none back during the test. The shared time is off:
    # on a busy machine five slow statements could spend it first, and it has a test of its own (below).
    settings = stack.settings(search={"client_rate": 0.001, "client_burst": 5, "anonymous_db_share": 0})
    async with app_client_factory(settings) as client:
        for query in ("kettle", "kettle", "lamp", "rugged", "backpack"):  # the second kettle loads the cached page
            assert (await client.get("/search", params={"q": query})).status_code == 200
        refused = await client.get("/search", params={"q": "wireless"})
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_requests"
        assert int(refused.headers["retry-after"]) >= 1
        assert (await client.get("/search", params={"q": "wireless keyboard"})).status_code == 429
        for cached in ("kettle", "KETTLE", " Kettle "):
            assert (await client.get("/search", params={"q": cached})).status_code == 200, cached
        with_key = await client.get("/search", params={"q": "wireless"}, headers=AUTH)
        assert with_key.status_code == 200, with_key.text
        wrong_key = await client.get("/search", params={"q": "ergonomic"}, headers={"Authorization": "Bearer nope"})
        assert wrong_key.status_code == 429


async def test_once_anonymous_searches_spent_their_share_of_postgres_they_get_429_and_key_holders_do_not(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    # A share so small that one statement spends it, and none comes back during the test.
    settings = stack.settings(search={"anonymous_db_share": 0.000001})
    async with app_client_factory(settings) as client:
        for _ in range(2):  # a key holder's second search caches the page
            assert (await client.get("/search", params={"q": "kettle"}, headers=AUTH)).status_code == 200
        assert (await client.get("/search", params={"q": "lamp"})).status_code == 200  # spends the share
        refused = await client.get("/search", params={"q": "rugged"})
        assert refused.status_code == 429, refused.text
        assert "share of the database" in refused.json()["error"]["message"]
        assert int(refused.headers["retry-after"]) >= 1
        assert (await client.get("/search", params={"q": "kettle"})).status_code == 200  # cached: free
        assert (await client.get("/search", params={"q": "rugged"}, headers=AUTH)).status_code == 200


@pytest.mark.parametrize("server", ["granian", "uvicorn", "gunicorn"])
def test_every_server_tenk_starts_charges_the_client_that_tenk_resolves(
    stack: Stack, spawn_api: Callable[..., ServerProcess], server: str
) -> None:
    # 127.0.0.2 plays a trusted proxy; 127.0.0.1 is a client that writes the header itself.
    api = spawn_api(stack, server, TENK_TRUSTED_PROXIES="127.0.0.2/32", **BUDGET_ENV)
    with client_from("127.0.0.1", api.base_url) as direct, client_from("127.0.0.2", api.base_url) as proxy:
        spend_budget(direct)
        # From a peer outside the trusted networks the header buys no other budget (uvicorn's and gunicorn's
        # own handling trusts 127.0.0.1's by default: tenk switches it off).
        assert search(direct, "198.51.100.1") == 429
        # Through the trusted proxy, each client it forwards for has a budget of its own...
        spend_budget(proxy, "198.51.100.1")
        assert search(proxy, "198.51.100.2") == 200
        # ...and only the right-most hop counts: what a client writes to its left buys nothing.
        assert search(proxy, "198.51.100.2, 198.51.100.1") == 429
        assert search(proxy) == 200  # the proxy's own requests are its own
