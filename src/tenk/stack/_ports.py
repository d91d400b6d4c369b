"""Free ports for servers we start, and proof that the server answering on a port is ours.

A port found free is free only at that instant: until our server binds it, another test run or any
outgoing connection can take it. Two defences, used together:
- `free_port` picks below the kernel's ephemeral range, where outgoing connections never get a port
  from, and at random, so that parallel runs rarely pick the same one;
- `wait_listening` waits until *our* process holds the listening socket. Merely finding the port open
  is not enough: it may be someone else's server, and a test would then talk to a stranger's Redis.
Callers that can choose the port retry on `PortTakenError` with a new one (`start_on_free_port`).
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import psutil

# Below this we would meet well-known services; the kernel's ephemeral range starts above.
_LOWEST_PORT = 20_000
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
# Linux's default for that range: what a machine we cannot ask, or another Linux box, most likely uses.
LINUX_DEFAULT_EPHEMERAL_RANGE = (32_768, 60_999)


class PortTakenError(RuntimeError):
    """A port we were asked to use is held by a process that is not ours."""


class ServerExitedError(RuntimeError):
    """The server we started exited before it listened."""


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (first, last); Linux's default where unreadable."""
    try:
        with open(_EPHEMERAL_RANGE) as ranges:
            first, last = ranges.read().split()[:2]
            return int(first), int(last)
    except (OSError, ValueError):
        return LINUX_DEFAULT_EPHEMERAL_RANGE


def _ephemeral_start() -> int:
    return ephemeral_range()[0]


def is_ephemeral(port: int) -> bool:
    """Whether an outgoing connection may hold this port at any moment, and so keep a server off it."""
    first, last = ephemeral_range()
    return first <= port <= last


def port_is_bindable(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a socket could bind the port now (nobody listens on it, nor holds it otherwise)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now, outside the range outgoing connections are given."""
    high = _ephemeral_start()
    if high - _LOWEST_PORT > 1_000:
        for _ in range(200):
            port = random.randrange(_LOWEST_PORT, high)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def listens_on(pid: int, port: int) -> bool:
    """Whether process `pid` or one of its descendants holds a listening socket on `port`."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    for proc in processes:
        try:
            connections = proc.net_connections(kind="inet")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections):
            return True
    return False


def wait_listening(process: subprocess.Popen[bytes], port: int, timeout: float, what: str) -> None:
    """Wait until `process` (or a child) listens on `port`.

    Raises PortTakenError when it exited while someone else holds the port, ServerExitedError when it
    exited otherwise, TimeoutError when neither happened within `timeout`.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if port_is_open(port):
                raise PortTakenError(f"port {port} is taken by another process")
            raise ServerExitedError(f"{what} exited with code {process.returncode} before listening on {port}")
        if listens_on(process.pid, port):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not listen on port {port} within {timeout}s")


class _Startable(Protocol):
    def start(self) -> bool: ...


Server = TypeVar("Server", bound=_Startable)


def start_on_free_port(make: Callable[[int], Server], attempts: int = 8) -> Server:
    """`make(port).start()` on a free port, on another one each time the chosen port is taken first."""
    for _ in range(attempts - 1):
        server = make(free_port())
        try:
            server.start()
        except PortTakenError:
            continue
        return server
    server = make(free_port())
    server.start()
    return server
