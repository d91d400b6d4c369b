"""A port chosen free is ours only once our own process listens on it (the suite shares the machine)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenk.settings import DatabaseSettings, RedisSettings
from tenk.stack import EmbeddedRedis, PortTakenError, free_port, listens_on, start_on_free_port, wait_listening
from tenk.stack._ports import _ephemeral_start, is_ephemeral
from tenk.stack.redis_cluster import bus_port


@pytest.fixture
def squatter() -> Iterator[int]:
    """Another program's server, on a port of its own."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_free_ports_come_from_below_the_range_outgoing_connections_use() -> None:
    # An outgoing connection can take any port in the ephemeral range between our pick and our bind.
    assert all(free_port() < _ephemeral_start() for _ in range(200))


def test_the_ports_tenk_up_uses_by_default_lie_outside_the_range_outgoing_connections_use() -> None:
    postgres = DatabaseSettings().embedded_port
    redis = RedisSettings().embedded_port
    nodes = range(redis + 1, redis + 7)  # --topology cluster: its Redis Cluster's six nodes
    ports = [postgres, postgres + 1, postgres + 2, redis, *nodes, *(bus_port(node) for node in nodes)]
    assert [port for port in ports if is_ephemeral(port)] == []


def test_a_port_someone_else_listens_on_does_not_make_our_process_ready(squatter: int) -> None:
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not listens_on(idle.pid, squatter)
        with pytest.raises(TimeoutError):
            wait_listening(idle, squatter, 1.0, "idle")
    finally:
        idle.kill()
        idle.wait()


def test_a_server_that_cannot_bind_because_the_port_was_taken_says_so(squatter: int) -> None:
    bound = subprocess.Popen(
        [sys.executable, "-c", f"import socket; socket.socket().bind(('127.0.0.1', {squatter}))"],
        stderr=subprocess.DEVNULL,
    )
    with pytest.raises(PortTakenError, match=f"port {squatter} is taken"):
        wait_listening(bound, squatter, 30, "server")


def test_a_stack_server_moves_to_another_port_when_its_pick_was_taken(stack_root: Path, squatter: int) -> None:
    picks: list[int] = []

    def make(port: int) -> EmbeddedRedis:
        # The first pick loses the race: the squatter bound it in between.
        picks.append(squatter if not picks else port)
        return EmbeddedRedis(stack_root / "redis", picks[-1])

    redis = start_on_free_port(make)
    try:
        assert picks[0] == squatter
        assert redis.port != squatter
        proc = redis.process()
        assert proc is not None
        assert listens_on(proc.pid, redis.port)
    finally:
        redis.stop()
