"""Who a request comes from: its peer, or, from a trusted proxy, the right-most untrusted X-Forwarded-For hop."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.stack import Stack
from tenk.app import create_app
from tenk.ops.forwarded import Address, TrustedProxies, address_of, is_in
from tenk.ops.logging import JsonFormatter
from tenk.settings import Settings
from tests.support.inprocess import app_in_process

PROXIES = TrustedProxies(["10.0.0.0/8", "127.0.0.1", "fd00::/8"])


def _scope(peer: str, *forwarded_for: str) -> dict[str, Any]:
    headers = [(b"x-forwarded-for", value.encode("latin-1")) for value in forwarded_for]
    return {"type": "http", "client": (peer, 5000), "headers": [(b"host", b"tenk.test"), *headers]}


def _client(peer: str, *forwarded_for: str) -> str | None:
    client = PROXIES.client(_scope(peer, *forwarded_for))
    return None if client is None else client[0]


def test_a_peer_outside_the_trusted_networks_is_the_client_whatever_it_forwards() -> None:
    assert PROXIES.client(_scope("203.0.113.9", "198.51.100.1")) == ("203.0.113.9", 5000)
    assert TrustedProxies([]).client(_scope("127.0.0.1", "198.51.100.1")) == ("127.0.0.1", 5000)


def test_from_a_trusted_proxy_the_client_is_the_right_most_hop_not_trusted() -> None:
    assert _client("10.0.0.5", "198.51.100.1") == "198.51.100.1"
    # The left-most is whatever the client wrote; the proxies' own hops are skipped.
    assert _client("10.0.0.5", "192.0.2.66, 198.51.100.1, 10.0.0.7") == "198.51.100.1"
    assert _client("10.0.0.5", "192.0.2.66", "198.51.100.1") == "198.51.100.1"  # two headers, in order
    assert _client("10.0.0.5", "10.0.0.9, 10.0.0.7") == "10.0.0.9"  # every hop trusted: the farthest
    assert _client("10.0.0.5") == "10.0.0.5"  # nothing forwarded: the proxy itself


def test_a_hop_that_is_not_an_address_ends_the_walk_at_the_last_trusted_one() -> None:
    assert _client("10.0.0.5", "198.51.100.1, unknown, 10.0.0.7") == "10.0.0.7"
    assert _client("10.0.0.5", "198.51.100.1, ") == "10.0.0.5"
    assert _client("10.0.0.5", "[2001:db8::1") == "10.0.0.5"


def test_ports_brackets_and_ipv4_mapped_addresses_are_read_as_the_address() -> None:
    assert _client("10.0.0.5", "198.51.100.1:4711") == "198.51.100.1"
    assert _client("10.0.0.5", "[2001:db8::1]:443") == "2001:db8::1"
    assert _client("10.0.0.5", "2001:db8::1") == "2001:db8::1"
    assert _client("::ffff:10.0.0.5", "::ffff:198.51.100.1") == "198.51.100.1"
    assert _client("fd00::1", "[fd00::2], 198.51.100.1, fd00::3") == "198.51.100.1"


# Header values are bytes: a client may send any of them (a comma would only make two entries).
_ENTRY = st.one_of(
    st.ip_addresses().map(str), st.text(st.characters(max_codepoint=255, exclude_characters=","), max_size=12)
)
_UNTRUSTED = st.ip_addresses().filter(lambda a: address_of(str(a)) == a and not is_in(a, PROXIES.networks))


@given(forged=st.lists(_ENTRY, max_size=6), real=_UNTRUSTED, proxies=st.integers(0, 3))
def test_nothing_a_client_writes_into_the_header_changes_who_it_is(
    forged: list[str], real: Address, proxies: int
) -> None:
    # The client sends any header; each trusted proxy then adds the address it took the request from.
    hops = [*forged, str(real), *(f"10.0.0.{n}" for n in range(1, proxies + 1))]
    assert _client("10.0.0.200", ", ".join(hops)) == str(real)


@pytest.mark.parametrize("trusted", [["127.0.0.1/32"], []], ids=["the peer is a trusted proxy", "none trusted"])
@pytest.mark.parametrize("hot_lane", [True, False])
async def test_the_edge_resolves_the_client_once_for_both_lanes_and_the_access_log(
    stack: Stack, caplog: pytest.LogCaptureFixture, hot_lane: bool, trusted: list[str]
) -> None:
    settings = stack.settings(hot_lane=hot_lane, trusted_proxies=trusted, access_log=True, log_level="INFO")
    forwarded = {"x-forwarded-for": "192.0.2.1, 198.51.100.7"}
    async with app_in_process(create_app(settings), client=("127.0.0.1", 4000)) as client:
        with caplog.at_level(logging.INFO, logger="tenk.access"):
            for path in ("/products/4", "/products?limit=1"):  # a hot route, and one FastAPI's alone answers
                assert (await client.get(path, headers=forwarded)).status_code == 200, path
    lines = [orjson.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "tenk.access"]
    assert [line["client"] for line in lines] == ["198.51.100.7" if trusted else "127.0.0.1"] * 2


def test_trusted_proxies_are_read_as_a_comma_separated_list_and_refused_when_not_networks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TENK_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1")
    assert Settings().trusted_proxies == ["10.0.0.0/8", "127.0.0.1"]
    monkeypatch.setenv("TENK_TRUSTED_PROXIES", "10.0.0.0/8,nginx")
    with pytest.raises(ValidationError, match="trusted_proxies"):
        Settings()
