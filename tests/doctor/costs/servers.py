"""Real servers for the cost tests: one that holds every answer until told, counting its connections, and
uvicorn serving an app in a thread of this process, where its calls can be counted."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import uvicorn

from tenk.stack import free_port
from tests.support.waiting import eventually_blocking

# A local server on an idle loop starts within milliseconds; a busy 2-core machine stretches that to
# seconds at worst (tenk serve's own start-up, harness.deadlines, is far longer).
START_S = 30.0


@dataclass
class HeldServer:
    """An HTTP server on a free port that accepts every connection and answers none until `release()`:
    what a pool does with concurrent requests shows in how many connections reach it."""

    port: int = 0
    connections: int = 0
    requests: int = 0
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                del head
                self.requests += 1
                await self._released.wait()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def release(self) -> None:
        self._released.set()

    async def stop(self) -> None:
        self.release()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@dataclass
class Served:
    port: int
    server: uvicorn.Server


@contextmanager
def served(
    app: Any, profile: Callable[[FrameType, str, object], None] | None = None, **options: Any
) -> Iterator[Served]:
    """uvicorn serving `app` on a free port in a thread of its own (its own event loop, made as
    `options` say), with `profile` as that thread's profiler when given. Signals stay the main thread's."""
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), lifespan="off", log_config=None, **options)
    server = uvicorn.Server(config)

    def run() -> None:
        if profile is not None:
            sys.setprofile(profile)
        server.run()

    thread = threading.Thread(target=run, name="uvicorn", daemon=True)
    thread.start()
    try:
        eventually_blocking(lambda: server.started or not thread.is_alive(), START_S, "uvicorn to start")
        assert thread.is_alive(), "uvicorn stopped at start-up"
        yield Served(config.port, server)
    finally:
        server.should_exit = True
        thread.join(START_S)


def get(port: int, path: str = "/") -> bytes:
    """One GET on a connection of its own, written with the standard library (no HTTP parser in Python
    on the client's side), closed by the server after the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=START_S) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    return answer
