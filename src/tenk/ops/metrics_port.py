"""/metrics on a port of its own (TENK_METRICS_PORT), so that the traffic port need not answer it.

A scraper (Prometheus, inside the cluster) reaches this port; the public one reaches only the traffic
port, where /metrics then does not exist. Each worker process binds the port with SO_REUSEPORT, as the
servers share their traffic port, and answers with the same registry /metrics would use (summed over
workers in multiprocess mode). The server speaks just enough HTTP/1.1 for a scrape: one GET, then close.
A client has TENK_HEADER_TIMEOUT_S to send its request head, and 16 KiB for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tenk.platform import TenkError, check_authorization_header, reply_for, scrape_registry

logger = logging.getLogger("tenk.ops.metrics_port")

MAX_HEAD_BYTES = 16 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Not Allowed"}


def _response(status: int, content_type: bytes, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n"
    ).encode()
    extra = b"www-authenticate: Bearer\r\n" if status == 401 else b""
    return head + b"content-type: " + content_type + b"\r\n" + extra + b"\r\n" + body


class MetricsPort:
    """The handler of one connection to the metrics port."""

    def __init__(self, header_timeout_s: float, key_required: bool, accepted_digests: Callable[[], list[str]]) -> None:
        self.header_timeout_s = header_timeout_s
        self.key_required = key_required
        self.accepted_digests = accepted_digests

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.header_timeout_s)
            writer.write(self.answer(head))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # a slow, truncated or oversized head: close without an answer
        finally:
            writer.close()
            with suppress(ConnectionError):
                await writer.wait_closed()

    def answer(self, head: bytes) -> bytes:
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, _, rest = request_line.partition(" ")
        target = rest.partition(" ")[0].partition("?")[0]
        if target != "/metrics":
            return _response(404, b"application/json", b'{"error":{"code":"not_found","message":"only /metrics"}}')
        if method != "GET":
            return _response(405, b"application/json", b'{"error":{"code":"method","message":"GET only"}}')
        if self.key_required:
            authorization = b""
            for line in header_lines:
                name, _, value = line.partition(":")
                if name.strip().lower() == "authorization":
                    authorization = value.strip().encode("latin-1")
                    break
            try:
                check_authorization_header(authorization, self.accepted_digests())
            except TenkError as exc:
                refusal = reply_for(exc)
                return _response(refusal.status, b"application/json", refusal.body)
        body = generate_latest(scrape_registry())
        return _response(200, CONTENT_TYPE_LATEST.encode(), body)


async def start_metrics_port(host: str, port: int, handler: MetricsPort) -> asyncio.Server:
    server = await asyncio.start_server(handler, host, port, reuse_port=True, limit=MAX_HEAD_BYTES)
    logger.info("serving /metrics on %s:%d", host, port)
    return server
