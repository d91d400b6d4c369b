"""Waiting for a server asks as curl asks: what the server is sent, and what its answers count as."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tenk.stack._process import http_status


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # http.server calls it by this name
        self.seen.append({name.lower(): value for name, value in self.headers.items()})
        status = 200 if self.path == "/ready?a=1" else 404
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A real HTTP server on loopback that records each request's headers; its base URL and the record."""
    seen: list[dict[str, str]] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_waiting_for_a_server_does_not_ask_it_to_close_the_connection(
    server: tuple[str, list[dict[str, str]]],
) -> None:
    # fastpysgi's ASGI server is left to crash later by one request that asks it to close (docs/httparena.md).
    base_url, seen = server
    assert http_status(base_url + "/ready?a=1", timeout=5) == 200
    assert [headers.get("connection", "") for headers in seen] == [""]


def test_an_error_status_is_an_answer_and_no_listener_is_none(server: tuple[str, list[dict[str, str]]]) -> None:
    base_url, _ = server
    assert http_status(base_url + "/missing", timeout=5) == 404
    assert http_status(base_url + "/ready?a=1", timeout=5) == 200  # the query reaches the server
    assert http_status("http://127.0.0.1:1/ready", timeout=5) is None
