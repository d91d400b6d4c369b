"""An anonymous client's search budget, spent against a real server: for the tests of who a client is
(TENK_TRUSTED_PROXIES and X-Forwarded-For), under every server tenk starts and behind nginx."""

from __future__ import annotations

import uuid

import httpx

# Three statements a client, none back during a test (one each thousand seconds), and no shared budget of
# Postgres time, which slow statements on a busy machine could spend first.
BUDGET_ENV = {
    "TENK_SEARCH_CLIENT_BURST": "3",
    "TENK_SEARCH_CLIENT_RATE": "0.001",
    "TENK_SEARCH_ANONYMOUS_DB_SHARE": "0",
}
# Every search that misses the cache costs a statement at least: past this many, the burst is long spent.
_MOST_SEARCHES = 10


def client_from(address: str, base_url: str) -> httpx.Client:
    """A client whose connections come from `address` (all of 127.0.0.0/8 is this machine's loopback)."""
    return httpx.Client(base_url=base_url, transport=httpx.HTTPTransport(local_address=address), timeout=30)


def search(http: httpx.Client, forwarded_for: str | None = None) -> int:
    """The status of a search no cache holds: a word of the seed, less a word never sent before."""
    headers = {"x-forwarded-for": forwarded_for} if forwarded_for is not None else {}
    return http.get("/search", params={"q": f"kettle -x{uuid.uuid4().hex}"}, headers=headers).status_code


def spend_budget(http: httpx.Client, forwarded_for: str | None = None) -> None:
    """Search until refused, which leaves the client's budget spent."""
    statuses: list[int] = []
    while len(statuses) < _MOST_SEARCHES and 429 not in statuses:
        statuses.append(search(http, forwarded_for))
    assert statuses[-1] == 429, statuses
    assert set(statuses[:-1]) <= {200}, statuses
