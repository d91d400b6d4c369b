"""A Redis Cluster on 127.0.0.1 that tenk starts itself: N masters, each with R replicas.

Each member is an `EmbeddedRedis` (AOF on, `noeviction`, password in its config file, identity checks on
its pidfile) with cluster mode on, in `<data dir>/node-<port>`. All members share one password (in
`<data dir>/password`), which they also use to replicate from each other (`masterauth`). Once every
member listens, `redis-cli --cluster create` assigns the 16384 slots evenly over the masters and
attaches the replicas; a cluster that already formed (a restart over the same data dir) keeps its
`nodes.conf` and is not created again.

The binary: Redis >= 7 (or Valkey), because tenk uses sharded pub/sub (SSUBSCRIBE/SPUBLISH) on a
cluster: `redis-server` from PATH or /usr/bin first, then valkey's. redis-cli (or valkey-cli) from the
same place forms the cluster. Debian: `apt-get install redis-server redis-tools`.

Usage:

    cluster = LocalRedisCluster(Path(".tenk/redis-cluster"), free_cluster_ports(6), masters=3)
    cluster.start()
    os.environ["TENK_REDIS_URL"] = cluster.url   # redis+cluster://:<password>@127.0.0.1:<port>,...
    cluster.members()                              # [(port, "master" | "slave", pid), ...]
    cluster.stop()

Every port `p` also needs its cluster-bus port free: `p + 10000`, or `p - 40000` for high ports (`bus_port`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.crc import key_slot

from tenk.stack._ports import LINUX_DEFAULT_EPHEMERAL_RANGE, free_port, is_ephemeral, port_is_bindable
from tenk.stack._private import make_private, secret
from tenk.stack.redis import EmbeddedRedis, RedisServerMissingError

CLUSTER_BUS_OFFSET = 10_000
_HIGH_BUS_OFFSET = 40_000
_LOWEST_BUS_PORT = 1_024
# Redis 7: SSUBSCRIBE/SPUBLISH (an older redis-server on PATH cannot serve a tenk cluster).
MIN_MAJOR_VERSION = 7
_SERVERS = ("redis-server", "valkey-server")
_CLIS = {"redis-server": "redis-cli", "valkey-server": "valkey-cli"}
_INSTALL_HINT = (
    "a local Redis Cluster needs redis-server >= 7 and redis-cli (or valkey-server and valkey-cli) on PATH; "
    "Debian/Ubuntu: sudo apt-get install redis-server redis-tools"
)


def cluster_binaries() -> tuple[str, str]:
    """(server, cli) of Redis >= 7 or Valkey, from PATH or /usr/bin."""
    for server_name in _SERVERS:
        for server in (shutil.which(server_name), f"/usr/bin/{server_name}"):
            if not server or not Path(server).exists():
                continue
            cli = Path(server).with_name(_CLIS[server_name])
            if cli.exists() and server_major_version(server) >= MIN_MAJOR_VERSION:
                return server, str(cli)
    raise RedisServerMissingError(_INSTALL_HINT)


def server_major_version(server: str) -> int:
    out = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    found = re.search(r"v=(\d+)\.", out)
    return int(found.group(1)) if found else 0


def bus_port(port: int) -> int:
    """The node's cluster-bus port (`cluster-port`, Redis 7), kept out of Linux's default ephemeral range
    (32768-60999) where it can: an outgoing connection holding it would keep the node from starting.

    Redis's default, `port + 10000`, where that lies below the range; `port - 40000` where that does
    (`tenk up --topology cluster` puts its nodes just above TENK_REDIS_EMBEDDED_PORT, 63799, whose
    `+ 10000` does not even exist); `port + 10000` otherwise. A function of the port alone, so that a
    node keeps its bus port across restarts and machines."""
    if port + CLUSTER_BUS_OFFSET < LINUX_DEFAULT_EPHEMERAL_RANGE[0]:
        return port + CLUSTER_BUS_OFFSET
    if port - _HIGH_BUS_OFFSET >= _LOWEST_BUS_PORT:
        return port - _HIGH_BUS_OFFSET
    return port + CLUSTER_BUS_OFFSET


def free_cluster_ports(count: int) -> list[int]:
    """`count` distinct free ports whose cluster-bus ports are free too, and outside this machine's ephemeral range."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        bus = bus_port(port)
        if port not in ports and not is_ephemeral(bus) and port_is_bindable(bus):
            ports.append(port)
    return ports


def shared_password(member_dir: Path) -> str:
    """The password every member of a group (a cluster, a Sentinel group) keeps in the group's directory.

    The members authenticate to each other with it too (`masterauth`)."""
    group_dir = member_dir.parent
    make_private(group_dir.parent, server_may_enter=True)
    make_private(group_dir, server_may_enter=True)
    make_private(member_dir, server_may_enter=True)
    return secret(group_dir / "password")


@dataclass
class ClusterMember(EmbeddedRedis):
    """One cluster node: an EmbeddedRedis with cluster mode on and the cluster's shared password."""

    server_binary: str = ""
    node_timeout_ms: int = 2_000

    @property
    def password(self) -> str:
        return shared_password(self.data_dir)

    def config(self) -> dict[str, str]:
        return {
            **super().config(),
            "cluster-enabled": "yes",
            # The server rewrites it: in the one directory the server owns (see `tenk.stack.redis`).
            "cluster-config-file": str(self.work_dir / "nodes.conf"),
            "cluster-port": str(bus_port(self.port)),
            # How long a master may be unreachable before its replica is promoted.
            "cluster-node-timeout": str(self.node_timeout_ms),
            "masterauth": self.password,
        }

    def argv(self) -> list[str]:
        return [self.server_binary, str(self.config_path)]


@dataclass
class LocalRedisCluster:
    """`len(ports)` must be `masters * (1 + replicas_per_master)`; the first `masters` ports become masters."""

    data_dir: Path
    ports: list[int]
    masters: int = 3
    replicas_per_master: int = 1
    server_binary: str | None = None
    cli_binary: str | None = None
    node_timeout_ms: int = 2_000
    maxmemory: str = "256mb"
    _members: list[ClusterMember] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()
        if self.masters < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 masters")
        if len(self.ports) != self.masters * (1 + self.replicas_per_master):
            raise ValueError(
                f"{self.masters} masters with {self.replicas_per_master} replicas each need "
                f"{self.masters * (1 + self.replicas_per_master)} ports, got {len(self.ports)}"
            )
        if self.server_binary is None or self.cli_binary is None:
            server, cli = cluster_binaries()
            self.server_binary = self.server_binary or server
            self.cli_binary = self.cli_binary or cli
        self._members = [
            ClusterMember(
                self.data_dir / f"node-{port}",
                port,
                maxmemory=self.maxmemory,
                server_binary=str(self.server_binary),
                node_timeout_ms=self.node_timeout_ms,
            )
            for port in self.ports
        ]

    @property
    def password(self) -> str:
        return self._members[0].password

    @property
    def url(self) -> str:
        """What TENK_REDIS_URL takes: every member is a seed node, so any one of them may be down."""
        nodes = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"redis+cluster://:{self.password}@{nodes}"

    def member(self, port: int) -> ClusterMember:
        return next(member for member in self._members if member.port == port)

    def start(self, timeout: float = 60.0) -> bool:
        """Start every member and form the cluster if it is not yet; False when it was already running whole."""
        for member in self._members:
            member.data_dir.mkdir(parents=True, exist_ok=True)
        started = [member.start(timeout) for member in self._members]
        if not self._formed():
            self._create(timeout)
        self.wait_healthy(timeout)
        return any(started)

    def admin(self, port: int) -> redis.Redis:
        """A plain client of one member (not the cluster), for administration: ROLE, CLIENT LIST, FLUSHALL."""
        return redis.Redis(port=port, password=self.password, socket_timeout=5, decode_responses=True)

    def master_of(self, key: str) -> int:
        """The port of the master that serves `key`'s slot, as the cluster says now."""
        slot = key_slot(key.encode())
        port = next(port for port, role, _ in self.members() if role == "master")
        with self.admin(port) as client:
            for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
                if int(start) <= slot <= int(end):
                    return int(master[1])
        raise RuntimeError(f"no master serves slot {slot}")

    def flush(self) -> None:
        """Empty every master (FLUSHALL); their replicas follow. For runs that each want an empty cluster."""
        for port, role, _ in self.members():
            if role == "master":
                with self.admin(port) as client:
                    client.flushall()

    def take_over(self, replica: int) -> None:
        """Promote the replica now, without waiting out failure detection (CLUSTER FAILOVER TAKEOVER)."""
        with self.admin(replica) as client:
            client.execute_command("CLUSTER FAILOVER TAKEOVER")

    def cluster_info(self, port: int) -> dict[str, str]:
        with self.admin(port) as client:
            reply = client.execute_command("CLUSTER INFO")
        # redis-py parses the reply into a dict (of ints and strings) on some versions, not on others.
        if isinstance(reply, dict):
            return {str(key): str(value) for key, value in reply.items()}
        return dict(line.split(":", 1) for line in str(reply).split() if ":" in line)

    def _formed(self) -> bool:
        info = self.cluster_info(self.ports[0])
        return info.get("cluster_slots_assigned") == "16384" and int(info.get("cluster_known_nodes", 0)) > 1

    def _create(self, timeout: float) -> None:
        argv = [
            str(self.cli_binary),
            "--cluster",
            "create",
            *(f"127.0.0.1:{port}" for port in self.ports),
            "--cluster-replicas",
            str(self.replicas_per_master),
            "--cluster-yes",
        ]
        # The password in redis-cli's environment (valkey-cli reads the same name), never on its command line,
        # which every local user may read; the servers keep it in their config files.
        env = {**os.environ, "REDISCLI_AUTH": self.password}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout}\n{done.stderr}")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Until every member reports the cluster ok with every slot served and each replica attached."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                if all(self._member_healthy(port) for port in self.ports):
                    return
            except (redis.RedisError, OSError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise TimeoutError(f"redis cluster on {self.ports} not healthy after {timeout}s ({last}): {self.members()}")

    def _member_healthy(self, port: int) -> bool:
        info = self.cluster_info(port)
        if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
            return False
        if int(info.get("cluster_known_nodes", 0)) != len(self.ports):
            return False
        with self.admin(port) as client:
            role = client.execute_command("ROLE")
        if role[0] == "master":
            # Only replicas whose link is up are listed: WAIT needs them connected, not just assigned.
            return bool(len(role[2]) == self.replicas_per_master)
        return bool(role[0] == "slave" and role[3] == "connected")

    def role(self, port: int) -> str:
        """'master' or 'slave' as the member says, or 'down'."""
        try:
            with self.admin(port) as client:
                return str(client.execute_command("ROLE")[0])
        except (redis.RedisError, OSError):
            return "down"

    def members(self) -> list[tuple[int, str, int | None]]:
        """(port, role, pid) of every member, for `tenk status` and for tests that kill one."""
        return [(member.port, self.role(member.port), member.pid()) for member in self._members]

    def replica_of(self, master_port: int) -> int | None:
        """The port of a replica attached to the master on `master_port`."""
        with self.admin(master_port) as client:
            role = client.execute_command("ROLE")
        replicas = role[2] if role[0] == "master" else []
        return int(replicas[0][1]) if replicas else None

    def stop(self) -> None:
        for member in self._members:
            member.stop()

    def kill(self, port: int) -> None:
        self.member(port).kill()
