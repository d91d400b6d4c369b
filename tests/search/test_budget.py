"""An anonymous client's searches have a budget of Postgres statements; cached pages and key holders are free."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tenk.search.budget import ClientBudget, SearchBudgetError, client_key
from tenk.settings import Settings
from tests.conftest import AUTH, Stack
from tests.search.test_cache import SteppedClock


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


def test_ipv6_clients_are_counted_by_their_64_block() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("203.0.113.9") == "203.0.113.9"


async def test_past_its_budget_an_anonymous_client_gets_429_with_retry_after_but_cached_pages_still_answer(
    stack: Stack, app_client_factory: Callable[[Settings], AsyncIterator[httpx.AsyncClient]]
) -> None:
    # Five statements, and (at one a thousand seconds) none back during the test.
    settings = stack.settings(search={"client_rate": 0.001, "client_burst": 5})
    async for client in app_client_factory(settings):
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
