"""The vendors the quotes tests call: the mock behind a client, and a vendor with odd answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx

QuotesClient = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


class OddVendor:
    """A vendor that answers what the mock never does: made-up symbols (404), prices JSON cannot hold,
    oversized bodies. A real HTTP server on a port of its own; it counts the calls per symbol."""

    ANSWERS: dict[str, tuple[int, bytes]] = {
        "NAN": (200, b'{"symbol":"NAN","price":"NaN","currency":"USD","as_of_ms":1}'),
        "INF": (200, b'{"symbol":"INF","price":"1e309","currency":"USD","as_of_ms":1}'),
        "HUGE": (200, b'{"symbol":"HUGE","price":1e309,"currency":"USD","as_of_ms":1}'),
        "BIG": (200, b'{"symbol":"BIG","price":1.5,"currency":"USD","as_of_ms":1,"pad":"' + b"x" * 1_000_000 + b'"}'),
        "OK": (200, b'{"symbol":"OK","price":1.5,"currency":"USD","as_of_ms":1}'),
    }

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            symbol = head.split(b" ", 2)[1].decode().rsplit("/", 1)[-1]
            self.calls[symbol] = self.calls.get(symbol, 0) + 1
            status, body = self.ANSWERS.get(symbol, (404, b'{"error":"no such symbol"}'))
            reason = b"OK" if status == 200 else b"Not Found"
            writer.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % (status, reason, len(body))
            )
            writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
