"""The `tenk mock-upstream` process, driven over HTTP as the service and the lab drive it."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast

import aiohttp
import httpx
import pytest
from pydantic import ValidationError

from harness.deadlines import deadline_s
from harness.stack import VENV_BIN
from tenk.lab.targets.mock_upstream import ADMIN_TOKEN_ENV, MockUpstreamProcess
from tenk.stack import Spawned, start_http_server
from tests.support.waiting import eventually, eventually_blocking


def test_a_quote_is_json_and_counted_per_symbol(mock: MockUpstreamProcess) -> None:
    response = httpx.get(f"{mock.url}/v1/quotes/AAPL")
    assert response.status_code == 200
    quote = response.json()
    assert quote["symbol"] == "AAPL"
    assert quote["currency"] == "USD"
    assert quote["price"] == httpx.get(f"{mock.url}/v1/quotes/AAPL").json()["price"]
    stats = mock.stats(symbol="AAPL")
    assert stats["quotes"] == 2
    assert stats["symbol"] == {"symbol": "AAPL", "quotes": 2}
    assert stats["answered"] == {"ok": 2}
    mock.reset_stats()
    assert mock.stats()["quotes"] == 0


def test_unknown_routes_and_methods(mock: MockUpstreamProcess) -> None:
    assert httpx.get(f"{mock.url}/v2/nothing").status_code == 404
    assert httpx.post(f"{mock.url}/v1/quotes/AAPL").status_code == 405
    assert httpx.get(f"{mock.url}/admin/latency", headers=_admin(mock)).status_code == 405


def _admin(mock: MockUpstreamProcess) -> dict[str, str]:
    return {"Authorization": f"Bearer {mock.admin_token}"}


async def _timed_quotes(url: str, count: int, prefix: str) -> list[tuple[int, float]]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int) -> tuple[int, float]:
            started = time.perf_counter()
            async with session.get(f"{url}/v1/quotes/{prefix}{i}") as response:
                await response.read()
                return response.status, time.perf_counter() - started

        return await asyncio.gather(*(one(i) for i in range(count)))


async def test_admin_route_changes_latency_at_run_time_and_stats_show_it(mock: MockUpstreamProcess) -> None:
    # The histogram is what clients saw, so on a busy machine it includes event-loop
    # delay. Measure that delay first, at the same concurrency, and allow exactly it.
    mock.set_profile(p50_ms=0, p99_ms=0)
    mock.reset_stats()
    await _timed_quotes(mock.url, 600, "BASE")
    overhead_ms = mock.stats()["latency_ms"]["p99"]
    assert overhead_ms is not None
    mock.reset_stats()

    assert mock.set_profile(p50_ms=50, p99_ms=200) == {
        "p50_ms": 50.0,
        "p99_ms": 200.0,
        "error_rate": 0.0,
        "hang_rate": 0.0,
    }
    results = await _timed_quotes(mock.url, 600, "LAT")
    assert {status for status, _ in results} == {200}
    latency = mock.stats()["latency_ms"]
    assert latency["count"] == 600
    p50, p99 = latency["p50"], latency["p99"]
    assert p50 is not None
    assert p99 is not None
    assert 40 <= p50 <= 65 + overhead_ms
    assert 140 <= p99 <= 320 + overhead_ms
    assert sum(count for _, count in latency["histogram"]) == 600

    mock.set_profile(p50_ms=0, p99_ms=0)
    fast = await _timed_quotes(mock.url, 50, "FAST")
    assert max(elapsed for _, elapsed in fast) < 0.5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"p50_ms": -5}, "body.p50_ms"),
        ({"p50_ms": 10, "p99_ms": 1}, "body.p99_ms"),
        ({"error_rate": 2}, "body.error_rate"),
        ({"hang_rate": "often"}, "body.hang_rate"),
        ({"speed": 1}, "body.speed"),
        ([1, 2], "body"),
    ],
)
def test_admin_route_refuses_bad_values_naming_the_field(mock: MockUpstreamProcess, body: object, field: str) -> None:
    response = httpx.put(f"{mock.url}/admin/latency", json=body, headers=_admin(mock))
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == field
    assert mock.stats()["profile"]["p50_ms"] == 0.0


def test_malformed_json_and_malformed_http_get_4xx(mock: MockUpstreamProcess) -> None:
    response = httpx.put(f"{mock.url}/admin/latency", content=b"{nope", headers=_admin(mock))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "malformed_json"
    host, port = mock.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 400")


def test_error_rate_gives_500s(mock: MockUpstreamProcess) -> None:
    mock.set_profile(error_rate=1.0)
    assert httpx.get(f"{mock.url}/v1/quotes/ERR").status_code == 500
    assert mock.stats()["answered"] == {"error": 1}


def test_a_hung_request_is_held_until_the_client_gives_up(mock: MockUpstreamProcess) -> None:
    mock.set_profile(hang_rate=1.0)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"{mock.url}/v1/quotes/HANG", timeout=0.3)
    eventually_blocking(
        lambda: mock.stats()["client_gone"] >= 1, deadline_s(), "the vendor to see the client go", every=0.05
    )
    stats = mock.stats()
    assert stats["client_gone"] == 1
    assert stats["in_flight"] == 0
    assert stats["max_in_flight"] == 1
    assert stats["answered"] == {}


def test_pipelined_requests_are_answered_in_order_on_one_connection(mock: MockUpstreamProcess) -> None:
    mock.set_profile(p50_ms=300, p99_ms=300)
    host, port = mock.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(
            b"GET /v1/quotes/SLOW HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    first, second = received.index(b'"symbol":"SLOW"'), received.index(b'{"status":"ok"}')
    assert first < second
    assert received.count(b"HTTP/1.1 200 OK") == 2


async def test_a_thousand_parked_requests_are_held_then_all_answered(mock: MockUpstreamProcess) -> None:
    mock.set_profile(p50_ms=1500, p99_ms=1500)
    task = asyncio.create_task(_timed_quotes(mock.url, 1000, "PARK"))

    async def all_held() -> bool:
        assert not task.done(), "the requests were answered before the vendor held all 1000"
        return int((await asyncio.to_thread(mock.stats))["in_flight"]) == 1000

    await eventually(all_held, deadline_s(), "the vendor to hold all 1000 requests", every=0.05)
    results = await asyncio.wait_for(task, 20)
    assert {status for status, _ in results} == {200}
    assert mock.stats()["in_flight"] == 0


class _OlderMock(BaseHTTPRequestHandler):
    """A mock whose /stats lacks what this client reads."""

    def do_GET(self) -> None:
        body = b'{"requests": 3, "quotes": 3}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_a_stats_answer_lacking_a_field_fails_on_arrival_naming_it() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), _OlderMock) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        client = MockUpstreamProcess(f"http://127.0.0.1:{server.server_port}", cast(Spawned, None), "token")
        with pytest.raises(ValidationError, match=r"in_flight\n  Field required"):
            client.stats()
        server.shutdown()


def test_admin_calls_need_the_token_the_mock_was_started_with(mock: MockUpstreamProcess) -> None:
    httpx.get(f"{mock.url}/v1/quotes/ADMIN")
    for headers in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": mock.admin_token}):
        slowed = httpx.put(f"{mock.url}/admin/latency", json={"p50_ms": 900, "p99_ms": 900}, headers=headers)
        assert slowed.status_code == 401, headers
        assert slowed.json()["error"]["fields"][0]["field"] == "header.authorization"
        assert httpx.delete(f"{mock.url}/stats", headers=headers).status_code == 401, headers
    stats = mock.stats()
    assert stats["profile"]["p50_ms"] == 0.0
    assert stats["quotes"] == 1, "a refused DELETE /stats reset the counts"
    assert httpx.get(f"{mock.url}/stats").status_code == 200  # reading the counts changes nothing


def _non_loopback_address() -> str:
    # The address this machine would send from to another host: not 127.0.0.0/8 or ::1.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))  # TEST-NET-3: routed like any host, never sent to
        except OSError:
            pytest.skip("this machine has no non-loopback IPv4 address to call the mock from")
        address = cast(str, probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("this machine has no non-loopback IPv4 address to call the mock from")
    return address


@pytest.mark.parametrize("token", ["", "lab-token"], ids=["started without a token", "called from another host"])
def test_admin_calls_answer_only_loopback_clients_of_a_mock_with_a_token(tmp_path: Path, token: str) -> None:
    address = _non_loopback_address() if token else ""
    server, url = start_http_server(
        "mock-upstream",
        lambda port: [str(VENV_BIN / "tenk"), "mock-upstream", "--host", "0.0.0.0", "--port", str(port)],
        lambda _: tmp_path / "mock.log",
        timeout=deadline_s(),
        env={**os.environ, ADMIN_TOKEN_ENV: token},
    )
    try:
        port = url.rsplit(":", 1)[1]
        caller = f"http://{address}:{port}" if token else url
        headers = {"Authorization": f"Bearer {token or 'guess'}"}
        assert httpx.get(f"{caller}/v1/quotes/AAPL").status_code == 200  # the vendor's API stays open
        slowed = httpx.put(f"{caller}/admin/latency", json={"p50_ms": 900, "p99_ms": 900}, headers=headers)
        assert slowed.status_code == 403
        assert httpx.delete(f"{caller}/stats", headers=headers).status_code == 403
        assert httpx.get(f"{url}/stats").json()["profile"]["p50_ms"] == 40.0
    finally:
        server.stop()
