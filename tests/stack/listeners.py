"""Listeners on an embedded server's freed port, as another local user would run them after `tenk down`.

Each accepts every connection and records what it is sent. The Postgres one answers as a server that wants a
cleartext password (asyncpg and libpq then send it); the Redis one answers `+OK` to anything (redis-py
opens with `AUTH <password>`). A client that reaches the embedded servers only through their private
sockets never connects to either.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

# The first packet's codes that ask for encryption before the startup message: refused with "N".
_SSL_REQUEST, _GSSENC_REQUEST = 80877103, 80877104
AUTHENTICATION_CLEARTEXT_PASSWORD = b"R" + struct.pack("!ii", 8, 3)
# A client that stays connected without a word is held no longer than this before the listener moves on.
IDLE_S = 5.0


@dataclass
class Heard:
    """What one listener was sent, as it arrives: the bytes of each connection it accepted."""

    connections: list[bytearray] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted(self) -> bytearray:
        received = bytearray()
        with self.lock:
            self.connections.append(received)
        return received

    def snapshot(self) -> list[bytes]:
        with self.lock:
            return [bytes(received) for received in self.connections]


def _read(conn: socket.socket, size: int, into: bytearray) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    into += data
    return data


def _pretend_postgres(conn: socket.socket, received: bytearray) -> None:
    while True:
        length, code = struct.unpack("!ii", _read(conn, 8, received))
        if code in (_SSL_REQUEST, _GSSENC_REQUEST):
            conn.sendall(b"N")
            continue
        _read(conn, length - 8, received)  # the startup message's parameters: user, database
        conn.sendall(AUTHENTICATION_CLEARTEXT_PASSWORD)
        _drain(conn, received)
        return


def _pretend_redis(conn: socket.socket, received: bytearray) -> None:
    while chunk := conn.recv(65536):
        received += chunk
        conn.sendall(b"+OK\r\n")


def _drain(conn: socket.socket, received: bytearray) -> None:
    while chunk := conn.recv(65536):
        received += chunk


class _Server(socketserver.ThreadingTCPServer):
    # The port was the server's a moment ago: its connections may linger in TIME_WAIT.
    allow_reuse_address = True
    daemon_threads = True


def _server(port: int, answer: str, heard: Heard) -> _Server:
    pretend = _pretend_postgres if answer == "postgres" else _pretend_redis

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            conn.settimeout(IDLE_S)
            with suppress(OSError):
                pretend(conn, heard.accepted())

    return _Server(("127.0.0.1", port), Handler)


@contextmanager
def listening_on(port: int, answer: str) -> Iterator[Heard]:
    """A listener on 127.0.0.1:`port` answering as `answer` ("postgres" or "redis"), until the block ends."""
    heard = Heard()
    server = _server(port, answer, heard)
    thread = threading.Thread(target=server.serve_forever, name=f"listener-{port}", daemon=True)
    thread.start()
    try:
        yield heard
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
