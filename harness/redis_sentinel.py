"""Redis Sentinel on 127.0.0.1, started for the suite: a master, one replica and three sentinels.

The master and the replica are `EmbeddedRedis` servers (AOF on, `noeviction`, identity checks on their
pidfiles) sharing one password (`<data dir>/password`), which they also replicate with (`masterauth`).
The sentinels are the same binary in sentinel mode (`redis-server <conf> --sentinel`), without a password
of their own, bound to 127.0.0.1; they rewrite their config files as they learn about each other.

Usage:

    group = LocalRedisSentinel(Path(".tenk/redis-sentinel"), [free_port() for _ in range(5)])
    group.start()
    os.environ["TENK_REDIS_URL"] = group.url  # redis+sentinel://:<password>@127.0.0.1:<port>,.../tenk
    group.failover()                          # the replica is master now; returns its port
    group.stop()

For the suite, not for production: a restart over the same data dir writes the first config again,
whoever is master. tenk itself never starts one (`tenk up` has no sentinel topology).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from tenk.stack._layout import InDataDir
from tenk.stack._private import run_as_server_user, write_private
from tenk.stack.redis import EmbeddedRedis, redis_server_path
from tenk.stack.redis_cluster import shared_password

SERVICE = "tenk"
# Sentinels agree that a master is down when this many of the three say so.
QUORUM = 2


@dataclass
class SentinelDataNode(EmbeddedRedis):
    """The master, or with `replica_of` the replica: an EmbeddedRedis with the group's password."""

    replica_of: int | None = None

    @property
    def password(self) -> str:
        return shared_password(self.data_dir)

    def config(self) -> dict[str, str]:
        config = {**super().config(), "masterauth": self.password}
        if self.replica_of is not None:
            config["replicaof"] = f"127.0.0.1 {self.replica_of}"
        return config

    def role(self) -> str:
        """'master' or 'slave' as the server says, or 'down'."""
        try:
            with self._client(self.password) as client:
                return str(client.execute_command("ROLE")[0])
        except (redis.RedisError, OSError):
            return "down"

    def linked_replicas(self) -> int:
        """How many replicas are connected to this server as its master."""
        with self._client(self.password) as client:
            role = client.execute_command("ROLE")
        return len(role[2]) if role[0] == "master" else 0


@dataclass
class SentinelNode(EmbeddedRedis):
    """One sentinel watching the master on `master_port` under the name `service`."""

    service: str = SERVICE
    master_port: int = 0
    master_password: str = ""
    down_after_ms: int = 1_000

    # A sentinel rewrites its config as it learns of the others: the file is the server's, in its directory.
    config_path = InDataDir("data/sentinel.conf")

    def write_config(self) -> None:
        """Written in our directory and handed over there, then renamed into the server's: a rename replaces a
        link the server's user may have put at that name, and never follows it."""
        self._make_dirs()
        self._hand_over_to_server_user()
        staged = self.data_dir / "sentinel.conf"
        write_private(staged, self.config_text())
        run_as = run_as_server_user()
        if run_as:
            os.chown(staged, run_as["user"], run_as["group"])
        os.replace(staged, self.config_path)

    def config(self) -> dict[str, str]:
        # Each directive names the service: "sentinel monitor" plus its value is one config line.
        return {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(self.work_dir),
            "daemonize": "no",
            "sentinel monitor": f"{self.service} 127.0.0.1 {self.master_port} {QUORUM}",
            "sentinel auth-pass": f"{self.service} {self.master_password}",
            "sentinel down-after-milliseconds": f"{self.service} {self.down_after_ms}",
            "sentinel failover-timeout": f"{self.service} {self.down_after_ms * 10}",
        }

    def argv(self) -> list[str]:
        return [redis_server_path(), str(self.config_path), "--sentinel"]

    def _client(self, password: str | None) -> redis.Redis:
        # Sentinels have no password: AUTH would be refused.
        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)

    def command(self, *args: str) -> Any:
        with self._client(None) as client:
            return client.execute_command(*args)

    def master_port_now(self) -> int | None:
        """The master's port as this sentinel reports it, or None when it does not answer."""
        try:
            address = self.command("SENTINEL GET-MASTER-ADDR-BY-NAME", self.service)
        except (redis.RedisError, OSError):
            return None
        return int(address[1]) if address else None

    def sees(self) -> tuple[int, int]:
        """(replicas, other sentinels) this sentinel knows of for the service."""
        state = self.command("SENTINEL MASTER", self.service)
        # A flat [name, value, ...] list on RESP2; a dict on some redis-py versions.
        fields = state if isinstance(state, dict) else dict(zip(state[::2], state[1::2], strict=True))
        return int(fields["num-slaves"]), int(fields["num-other-sentinels"])


@dataclass
class LocalRedisSentinel:
    """`ports`: the master's, the replica's, then the three sentinels'."""

    data_dir: Path
    ports: list[int]
    service: str = SERVICE
    down_after_ms: int = 1_000
    _nodes: list[SentinelDataNode] = field(default_factory=list, init=False, repr=False)
    _sentinels: list[SentinelNode] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()
        if len(self.ports) != 5:
            raise ValueError(f"a master, a replica and three sentinels need 5 ports, got {len(self.ports)}")
        master, replica, *sentinels = self.ports
        self._nodes = [
            SentinelDataNode(self.data_dir / f"node-{master}", master, maxmemory="256mb"),
            SentinelDataNode(self.data_dir / f"node-{replica}", replica, maxmemory="256mb", replica_of=master),
        ]
        self._sentinels = [
            SentinelNode(
                self.data_dir / f"sentinel-{port}",
                port,
                service=self.service,
                master_port=master,
                master_password=self.password,
                down_after_ms=self.down_after_ms,
            )
            for port in sentinels
        ]

    @property
    def password(self) -> str:
        return self._nodes[0].password

    @property
    def url(self) -> str:
        """What TENK_REDIS_URL takes: every sentinel, so that any one of them may be down."""
        sentinels = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self._sentinels)
        return f"redis+sentinel://:{self.password}@{sentinels}/{self.service}"

    @property
    def sentinels(self) -> list[SentinelNode]:
        return list(self._sentinels)

    def node(self, port: int) -> SentinelDataNode:
        return next(node for node in self._nodes if node.port == port)

    def start(self, timeout: float = 60.0) -> None:
        """The servers, then, once the replica has synced, the sentinels: they learn of replicas from the
        master's INFO, and would otherwise miss one that connects after their first look for 10 s."""
        for server in [*self._nodes, *self._sentinels]:
            server.data_dir.mkdir(parents=True, exist_ok=True)
        for node in self._nodes:
            node.start(timeout)
        self._wait(lambda: self._nodes[0].linked_replicas() == 1, timeout, "the replica to sync")
        for sentinel in self._sentinels:
            sentinel.start(timeout)
        self._wait(self._sentinels_see_everyone, timeout, "the sentinels to find the replica and each other")

    def _sentinels_see_everyone(self) -> bool:
        return all(sentinel.sees() == (1, len(self._sentinels) - 1) for sentinel in self._sentinels)

    def master_port(self) -> int | None:
        """The master's port as the first sentinel that answers reports it."""
        return next((port for port in (s.master_port_now() for s in self._sentinels) if port is not None), None)

    def failover(self, timeout: float = 60.0) -> int:
        """SENTINEL FAILOVER, then wait until every sentinel names the replica as master, it says so
        itself, and the old master has been made its replica (until then it still takes writes)."""
        old = self.master_port()
        assert old is not None, "no sentinel answers"
        new = next(port for port in self.ports[:2] if port != old)
        self._sentinels[0].command("SENTINEL FAILOVER", self.service)

        def done() -> bool:
            named = all(sentinel.master_port_now() == new for sentinel in self._sentinels)
            return named and self.node(new).role() == "master" and self.node(old).role() == "slave"

        self._wait(done, timeout, f"the sentinels to fail over from {old} to {new}")
        return new

    def _wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except (redis.RedisError, OSError) as exc:
                last = f" (last: {exc})"
            time.sleep(0.1)  # polling a state, with a deadline: not synchronisation by sleep
        raise TimeoutError(f"waited {timeout}s for {what}{last}")

    def stop(self) -> None:
        for server in [*self._sentinels, *self._nodes]:
            server.stop()

    def stop_sentinels(self) -> None:
        for sentinel in self._sentinels:
            sentinel.stop()
