"""The mock vendor's HTTP server: asyncio protocols on uvloop, parsed by httptools, no framework.

A framework would cost a task and an ASGI scope per request; here a delayed answer is one timer
handle on the event loop, so ten thousand parked requests cost ten thousand timers and sockets.
HTTP/1.1 keep-alive and pipelining are honoured: answers leave a connection in request order.

The admin calls (`PUT /admin/latency`, `DELETE /stats`) change what every client measures, so they
answer only a loopback client that sends `Authorization: Bearer <token>`, the token the mock was started
with (TENK_MOCK_ADMIN_TOKEN, in its environment: argv is readable by every local user). Without a token
they are off. The lab and the test fixtures start the mock with a fresh token and send it.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import signal
import time
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import httptools
import orjson

from tenk.lab.targets.mock_upstream.profile import Outcome, Profile, ProfileError, Sampler
from tenk.lab.targets.mock_upstream.stats import Stats

logger = logging.getLogger("tenk.lab.targets.mock_upstream")

QUOTE_PREFIX = "/v1/quotes/"
MAX_SYMBOL_LENGTH = 64
# A drawn delay longer than this is cut short; a lognormal tail is long but a test run is not.
MAX_DELAY_S = 600.0
# More pipelined requests than this waiting on one connection is abuse, not a client.
MAX_PIPELINED = 1024
BACKLOG = 16384

_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    401: b"Unauthorized",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    422: b"Unprocessable Entity",
    500: b"Internal Server Error",
}


def http_response(status: int, body: bytes, keep_alive: bool = True) -> bytes:
    head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n" % (
        status,
        _REASONS[status],
        len(body),
        b"" if keep_alive else b"Connection: close\r\n",
    )
    return head + body


def _error(code: str, message: str, field: str | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["fields"] = [{"field": field, "message": message}]
    return orjson.dumps({"error": error})


_NOT_FOUND = _error("not_found", "no such route")
_NOT_ALLOWED = _error("method_not_allowed", "method not allowed")
_UPSTREAM_ERROR = _error("internal", "mock upstream error (injected)")
_HEALTHY = orjson.dumps({"status": "ok"})
_ADMIN_OFF = _error("forbidden", "admin calls are off: start the mock with TENK_MOCK_ADMIN_TOKEN")
_ADMIN_REMOTE = _error("forbidden", "admin calls answer loopback clients only")
_ADMIN_NO_TOKEN = _error("unauthorized", "send Authorization: Bearer <admin token>", "header.authorization")
ADMIN_TOKEN_ENV = "TENK_MOCK_ADMIN_TOKEN"


def quote_body(symbol: str) -> bytes:
    # A stable price per symbol, so responses can be checked; the timestamp shows freshness.
    price = 1 + (zlib.crc32(symbol.encode()) % 1_000_000) / 100
    return orjson.dumps({"symbol": symbol, "price": price, "currency": "USD", "as_of_ms": int(time.time() * 1000)})


class _Slot:
    """One request's place in its connection's answer queue."""

    __slots__ = ("keep_alive", "response", "started", "timer")

    def __init__(self, keep_alive: bool, started: float) -> None:
        self.keep_alive = keep_alive
        self.started = started
        self.response: bytes | None = None
        self.timer: asyncio.TimerHandle | None = None


class MockUpstream:
    """The behaviour shared by every connection: the profile, the sampler and the stats."""

    def __init__(self, profile: Profile, seed: int | None, admin_token: str = "") -> None:
        self.sampler = Sampler(profile, seed)
        self.stats = Stats()
        self.connections: set[_Connection] = set()
        self._admin_authorization = f"Bearer {admin_token}".encode() if admin_token else b""

    def _admin_refusal(self, conn: _Connection) -> bytes | None:
        """Why this request may not change the mock (an answer to send), or None."""
        if not self._admin_authorization:
            return http_response(403, _ADMIN_OFF, False)
        if not conn.loopback:
            return http_response(403, _ADMIN_REMOTE, False)
        if not hmac.compare_digest(conn.authorization, self._admin_authorization):
            return http_response(401, _ADMIN_NO_TOKEN, False)
        return None

    def handle(self, conn: _Connection, slot: _Slot, method: bytes, url: bytes, body: bytes) -> None:
        self.stats.requests += 1
        parsed = httptools.parse_url(url)
        path = parsed.path.decode("latin-1")
        if path.startswith(QUOTE_PREFIX):
            if method != b"GET":
                conn.fill(slot, http_response(405, _NOT_ALLOWED, slot.keep_alive))
                return
            self._quote(conn, slot, path[len(QUOTE_PREFIX) :])
        elif path == "/health":
            conn.fill(slot, http_response(200, _HEALTHY, slot.keep_alive))
        elif path == "/stats":
            self._stats(conn, slot, method, parsed.query)
        elif path == "/admin/latency":
            if (refusal := self._admin_refusal(conn)) is not None:
                slot.keep_alive = False
                conn.fill(slot, refusal)
                return
            self._admin(conn, slot, method, body)
        else:
            conn.fill(slot, http_response(404, _NOT_FOUND, slot.keep_alive))

    def _quote(self, conn: _Connection, slot: _Slot, symbol: str) -> None:
        if not symbol or len(symbol) > MAX_SYMBOL_LENGTH or "/" in symbol:
            conn.fill(slot, http_response(404, _error("not_found", "no such symbol", "path.symbol"), slot.keep_alive))
            return
        self.stats.quote(symbol)
        delay_s, outcome = self.sampler.draw()
        self.stats.parked()
        conn.pending += 1
        if outcome is Outcome.HANG:
            return
        if delay_s <= 0:
            self.answer(conn, slot, symbol, outcome)
            return
        slot.timer = asyncio.get_running_loop().call_later(
            min(delay_s, MAX_DELAY_S), self.answer, conn, slot, symbol, outcome
        )

    def answer(self, conn: _Connection, slot: _Slot, symbol: str, outcome: Outcome) -> None:
        if conn.closed:
            return
        slot.timer = None
        conn.pending -= 1
        self.stats.unparked()
        self.stats.answered(outcome.value, time.perf_counter() - slot.started)
        if outcome is Outcome.OK:
            conn.fill(slot, http_response(200, quote_body(symbol), slot.keep_alive))
        else:
            conn.fill(slot, http_response(500, _UPSTREAM_ERROR, slot.keep_alive))

    def _stats(self, conn: _Connection, slot: _Slot, method: bytes, query: bytes | None) -> None:
        if method == b"DELETE":
            if (refusal := self._admin_refusal(conn)) is not None:
                slot.keep_alive = False
                conn.fill(slot, refusal)
                return
            self.stats.reset()
            # Requests held right now are still held: keep counting them.
            self.stats.in_flight = self.stats.max_in_flight = sum(c.pending for c in self.connections)
        elif method != b"GET":
            conn.fill(slot, http_response(405, _NOT_ALLOWED, slot.keep_alive))
            return
        symbol = None
        if query:
            for pair in query.decode("latin-1").split("&"):
                name, _, value = pair.partition("=")
                if name == "symbol" and value:
                    symbol = value
        body = orjson.dumps(self.stats.snapshot(self.sampler.profile.as_dict(), symbol))
        conn.fill(slot, http_response(200, body, slot.keep_alive))

    def _admin(self, conn: _Connection, slot: _Slot, method: bytes, body: bytes) -> None:
        if method != b"PUT":
            conn.fill(slot, http_response(405, _NOT_ALLOWED, slot.keep_alive))
            return
        try:
            changes = orjson.loads(body)
        except orjson.JSONDecodeError:
            conn.fill(
                slot, http_response(422, _error("malformed_json", "the body is not JSON", "body"), slot.keep_alive)
            )
            return
        if not isinstance(changes, dict):
            conn.fill(
                slot, http_response(422, _error("invalid_input", "expected a JSON object", "body"), slot.keep_alive)
            )
            return
        try:
            self.sampler.profile = self.sampler.profile.updated(changes)
        except ProfileError as exc:
            conn.fill(
                slot,
                http_response(422, _error("invalid_input", exc.message, f"body.{exc.field}"), slot.keep_alive),
            )
            return
        logger.info("profile changed to %s", self.sampler.profile)
        conn.fill(slot, http_response(200, orjson.dumps(self.sampler.profile.as_dict()), slot.keep_alive))

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.abort()


class _Connection(asyncio.Protocol):
    def __init__(self, app: MockUpstream) -> None:
        self.app = app
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.slots: deque[_Slot] = deque()
        self.pending = 0
        self.closed = False
        self.loopback = False
        self.authorization = b""
        self._url = b""
        self._body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast("asyncio.Transport", transport)
        self.app.connections.add(self)
        peer = transport.get_extra_info("peername")
        try:
            self.loopback = ipaddress.ip_address(peer[0]).is_loopback
        except (TypeError, ValueError, IndexError):
            self.loopback = False

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.slots.clear()
            self._write_and_close(http_response(400, _error("bad_request", "malformed HTTP request"), False))
        except httptools.HttpParserUpgrade:
            self._write_and_close(http_response(400, _error("bad_request", "upgrades are not supported"), False))

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url = b""
        self._body = []
        self.authorization = b""

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"authorization":
            self.authorization = value

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if len(self.slots) >= MAX_PIPELINED:
            self.abort()
            return
        slot = _Slot(self.parser.should_keep_alive(), time.perf_counter())
        self.slots.append(slot)
        self.app.handle(self, slot, self.parser.get_method(), self._url, b"".join(self._body))

    def fill(self, slot: _Slot, response: bytes) -> None:
        slot.response = response
        slots = self.slots
        while slots and slots[0].response is not None and not self.closed:
            ready = slots.popleft()
            assert self.transport is not None
            self.transport.write(cast(bytes, ready.response))
            if not ready.keep_alive:
                self.closed = True
                self.transport.close()

    def _write_and_close(self, response: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(response)
            self.transport.close()
        self.closed = True

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.app.connections.discard(self)
        stats = self.app.stats
        for slot in self.slots:
            if slot.timer is not None:
                slot.timer.cancel()
        # Requests the client gave up on (hangs, or answers it would not wait for).
        if self.pending:
            stats.client_gone += self.pending
            stats.in_flight -= self.pending
            self.pending = 0
        self.slots.clear()


async def serve(
    host: str,
    port: int,
    profile: Profile,
    seed: int | None,
    on_ready: Callable[[str, int], None] | None = None,
    admin_token: str = "",
) -> None:
    """Serve until SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    app = MockUpstream(profile, seed, admin_token)
    server = await loop.create_server(lambda: _Connection(app), host, port, backlog=BACKLOG, reuse_address=True)
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    bound_port = server.sockets[0].getsockname()[1]
    if on_ready is not None:
        on_ready(host, bound_port)
    try:
        await stopping.wait()
    finally:
        server.close()
        app.close_all()
        await server.wait_closed()


def run(
    host: str,
    port: int,
    profile: Profile,
    seed: int | None,
    on_ready: Callable[[str, int], None] | None = None,
    admin_token: str = "",
) -> None:
    """Run the mock on uvloop (plain asyncio where uvloop is missing)."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(host, port, profile, seed, on_ready, admin_token))
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(host, port, profile, seed, on_ready, admin_token))
