"""A client that sends its request head a byte a second (slowloris) is cut off by every server tenk
serves on, TENK_HEADER_TIMEOUT_S after it connected, against a real `tenk serve` process."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import httpx
import pytest

from harness.stack import Stack
from tests.support.servers import ServerProcess

# Small, so that the test is short; the default is 10 s.
HEADER_TIMEOUT_S = 2.0


def _connected(base_url: str) -> socket.socket:
    host, port = base_url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _slowloris_held_for(base_url: str, give_up_after_s: float) -> float:
    """Send a request head one byte a second, never finishing it; how long the server kept the connection."""
    head = b"GET /products/1 HTTP/1.1\r\nHost: tenk.test\r\nX-Slow: " + b"a" * 10_000
    with _connected(base_url) as sock:
        started = time.monotonic()
        for byte in head:
            elapsed = time.monotonic() - started
            if elapsed > give_up_after_s:
                return elapsed
            try:
                sock.sendall(bytes([byte]))
                # The pause between bytes, spent waiting for the server to close (or answer and close).
                sock.settimeout(1.0)
                if not sock.recv(4096):
                    return time.monotonic() - started
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - started
            # An answer (a 408) came: the close follows it.
            sock.settimeout(max(0.1, give_up_after_s - elapsed))
            try:
                while sock.recv(4096):
                    pass
            except (TimeoutError, ConnectionResetError):
                pass
            return time.monotonic() - started
    raise AssertionError("the whole head was sent")


def _answer(sock: socket.socket) -> bytes:
    """One whole HTTP/1.1 answer with a Content-Length."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"closed mid-answer: {received[:200]!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("server", ["granian", "uvicorn", "gunicorn"])
def test_a_head_sent_a_byte_a_second_is_cut_off_at_the_header_timeout(
    stack: Stack, spawn_api: Callable[..., ServerProcess], server: str
) -> None:
    api = spawn_api(stack, server=server, TENK_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S))
    # What a whole request costs here and now, so that the allowance scales with the machine's load.
    with httpx.Client(base_url=api.base_url, timeout=30) as http:
        started = time.monotonic()
        assert http.get("/products/1").status_code == 200
        assert http.get("/products/2").status_code == 200  # the next head's deadline is re-armed, not spent
        request_s = (time.monotonic() - started) / 2
    allowance_s = 2.0 + 20 * request_s
    held_s = _slowloris_held_for(api.base_url, give_up_after_s=HEADER_TIMEOUT_S * 5 + allowance_s)
    assert held_s >= HEADER_TIMEOUT_S * 0.9, f"{server} closed after {held_s:.1f}s, before the timeout"
    assert held_s <= HEADER_TIMEOUT_S + allowance_s, f"{server} held a slowloris {held_s:.1f}s ({api.log_tail()})"


def test_a_keep_alive_connection_gets_a_fresh_head_deadline_after_each_answer(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    api = spawn_api(stack, server="uvicorn", TENK_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S))
    with _connected(api.base_url) as sock:
        for product in range(1, 4):
            started = time.monotonic()
            sock.sendall(f"GET /products/{product} HTTP/1.1\r\nHost: tenk.test\r\n\r\n".encode())
            answer = _answer(sock)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            # Well inside one deadline each, but longer than one altogether: the deadline is per head.
            assert time.monotonic() - started < HEADER_TIMEOUT_S
            time.sleep(HEADER_TIMEOUT_S * 0.4)  # a client's think time, not synchronisation
