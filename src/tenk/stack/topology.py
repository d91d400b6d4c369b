"""`tenk up --topology cluster`: every member of the local cluster, composed in one place.

A topology is its stores (what holds the data: Postgres, Redis) and its fleet (API nodes, ingest
workers, the load balancer; `tenk.stack.fleet`). The fleet is pointed at the stores through the
environment each store contributes (`Store.env`), so swapping a store changes nothing else.

The cluster's stores: the embedded Postgres as the primary, a streaming replica of it
(`tenk.stack.pg_replica`), PgBouncer in transaction mode in front of the primary
(`tenk.stack.pgbouncer`), and a Redis Cluster of 3 masters and 3 replicas
(`tenk.stack.redis_cluster`), each giving its members and its TENK_* variables. Their ports follow
the embedded servers' (TENK_DATABASE_EMBEDDED_PORT + 1 and + 2, TENK_REDIS_EMBEDDED_PORT + 1 to + 6),
so that `tenk status` and `tenk down`, run later, find the same members.

`tenk down` finds what to stop from `<data dir>/cluster/` (members.json, written as members start).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tenk.settings import Settings
from tenk.stack._ports import port_is_open
from tenk.stack.fleet import Fleet, http_ready
from tenk.stack.pg_replica import LocalPgReplica
from tenk.stack.pgbouncer import LocalPgBouncer
from tenk.stack.postgres import EmbeddedPostgres
from tenk.stack.redis import EmbeddedRedis
from tenk.stack.redis_cluster import LocalRedisCluster

TOPOLOGIES = ("single", "cluster")


@dataclass(frozen=True)
class MemberStatus:
    """One line of `tenk status`."""

    name: str
    role: str
    pid: int | None
    port: int | None
    up: bool
    ready: str = "-"


class Store(Protocol):
    """Something the fleet keeps its data in, started before it and stopped after it."""

    def start(self) -> str: ...  # what it did, for the user

    def stop(self) -> None: ...

    def env(self) -> dict[str, str]: ...  # TENK_* variables that point tenk at it

    def statuses(self) -> list[MemberStatus]: ...


@dataclass
class EmbeddedStore:
    """The embedded single Postgres or Redis that `tenk up` starts anyway, as a cluster store."""

    name: str
    server: EmbeddedPostgres | EmbeddedRedis
    url_variable: str

    def start(self) -> str:
        started = self.server.start()
        return f"{self.name}: {'started' if started else 'already running'} on port {self.server.port}"

    def stop(self) -> None:
        self.server.stop()

    def env(self) -> dict[str, str]:
        return {self.url_variable: self.server.url}

    def statuses(self) -> list[MemberStatus]:
        pid = self.server.pid()
        return [MemberStatus(self.name, self.name, pid, self.server.port, pid is not None)]


@dataclass
class ReplicaStore:
    """A streaming replica of the primary: catalog misses, listings and search read from it."""

    replica: LocalPgReplica

    def start(self) -> str:
        started = self.replica.start()
        return f"postgres replica: {'started' if started else 'already running'} on port {self.replica.port}"

    def stop(self) -> None:
        self.replica.stop()

    def env(self) -> dict[str, str]:
        return {"TENK_DATABASE_REPLICA_URLS": self.replica.url}

    def statuses(self) -> list[MemberStatus]:
        pid = self.replica.server.pid()
        return [MemberStatus("postgres-replica", "replica", pid, self.replica.port, pid is not None)]


@dataclass
class PgBouncerStore:
    """PgBouncer in transaction mode in front of the primary; migrations and locks bypass it."""

    primary: EmbeddedPostgres
    data_dir: Path
    port: int

    def _bouncer(self) -> LocalPgBouncer:
        # Built when needed: the primary's password exists only once the primary has been initialised.
        return LocalPgBouncer(
            self.data_dir,
            self.port,
            str(self.primary.socket_host),
            self.primary.port,
            self.primary.app_role,
            self.primary.app_password,
        )

    def start(self) -> str:
        started = self._bouncer().start()
        return f"pgbouncer: {'started' if started else 'already running'} on port {self.port}"

    def stop(self) -> None:
        self._bouncer().stop()

    def env(self) -> dict[str, str]:
        return {
            "TENK_DATABASE_URL": self._bouncer().url,
            "TENK_DATABASE_POOLER": "transaction",
            "TENK_DATABASE_DIRECT_URL": self.primary.url,
        }

    def statuses(self) -> list[MemberStatus]:
        proc = self._bouncer().process() if self.primary.pgdata.exists() else None
        pid = proc.pid if proc is not None else None
        return [MemberStatus("pgbouncer", "pooler", pid, self.port, pid is not None)]


@dataclass
class RedisClusterStore:
    """A Redis Cluster; ingest is split into one stream shard per master."""

    cluster: LocalRedisCluster

    def start(self) -> str:
        formed = self.cluster.start()
        ports = f"{self.cluster.ports[0]}-{self.cluster.ports[-1]}"
        return f"redis cluster: {'formed' if formed else 'already running'} on ports {ports}"

    def stop(self) -> None:
        self.cluster.stop()

    def env(self) -> dict[str, str]:
        return {"TENK_REDIS_URL": self.cluster.url, "TENK_INGEST_SHARDS": str(self.cluster.masters)}

    def statuses(self) -> list[MemberStatus]:
        rows = []
        for port, role, pid in self.cluster.members():
            up = pid is not None and port_is_open(port)
            rows.append(MemberStatus(f"redis-{port}", f"redis-{role}", pid, port, up))
        return rows


@dataclass
class Topology:
    stores: list[Store]
    fleet: Fleet

    @property
    def database_url(self) -> str:
        """Where migrations and the seed go (the primary, directly, never through a pooler)."""
        env = self.fleet.env
        return env.get("TENK_DATABASE_DIRECT_URL") or env["TENK_DATABASE_URL"]

    def start_stores(self) -> Iterator[str]:
        for store in self.stores:
            yield store.start()
            self.fleet.env.update(store.env())

    def rolling_restart(self) -> Iterator[str]:
        """Every API node in turn: it leaves rotation and drains, stops, starts again on its port with this
        environment (a changed TENK_* setting rolls out this way), and is back in rotation before the next
        one goes, so the balancer always has a node to send requests to."""
        for store in self.stores:
            self.fleet.env.update(store.env())
        for member in [m for m in self.fleet.members() if m.role == "api"]:
            restarted = self.fleet.restart(member.name)
            yield f"{member.name}: restarted (pid {member.pid} -> {restarted.pid}), back in rotation"

    def stop(self) -> Iterator[str]:
        """The fleet first (nodes drain, workers flush into the stores), then the stores."""
        names = [m.name for m in self.fleet.members()]
        self.fleet.stop()
        yield from (f"{name}: stopped" for name in names)
        for store in reversed(self.stores):
            store.stop()
            yield from (f"{s.name}: stopped" for s in store.statuses())

    def statuses(self) -> list[MemberStatus]:
        rows = [status for store in self.stores for status in store.statuses()]
        rotation = self.fleet.in_rotation()
        for member in self.fleet.members():
            proc = member.process()
            up = proc is not None
            ready = "-"
            if up and member.role == "api" and member.port is not None:
                ready = "ready" if http_ready(member.port) else "not ready"
                ready += ", in rotation" if rotation.get(member.name) else ", out of rotation"
            elif up and member.role == "lb" and member.port is not None:
                ready = "ready" if http_ready(member.port) else "not ready (no node in rotation)"
            rows.append(MemberStatus(member.name, member.role, member.pid if up else None, member.port, up, ready))
        return rows


def run_dir(settings: Settings) -> Path:
    return (settings.data_dir / "cluster").resolve()


def is_recorded(settings: Settings) -> bool:
    """Whether `tenk up --topology cluster` left members to stop or show."""
    return (run_dir(settings) / "members.json").exists()


def cluster_stores(settings: Settings) -> list[Store]:
    """The stores of the local cluster, in start order. An external TENK_DATABASE_URL / TENK_REDIS_URL
    is used as given (it is the platform's own pooler, replicas or cluster)."""
    stores: list[Store] = []
    if not settings.database.url:
        port = settings.database.embedded_port
        primary = settings.embedded_postgres()
        stores.append(EmbeddedStore("postgres", primary, "TENK_DATABASE_URL"))
        stores.append(ReplicaStore(LocalPgReplica(settings.data_dir / "postgres-replica", port + 2, primary)))
        stores.append(PgBouncerStore(primary, settings.data_dir / "pgbouncer", port + 1))
    if not settings.redis.url:
        first = settings.redis.embedded_port + 1
        stores.append(
            RedisClusterStore(LocalRedisCluster(settings.data_dir / "redis-cluster", list(range(first, first + 6))))
        )
    return stores


def cluster(settings: Settings, apis: int = 2, workers: int = 2) -> Topology:
    env = dict(os.environ)
    # Members run on after this CLI exits, from whatever directory: give them absolute paths.
    env["TENK_DATA_DIR"] = str(settings.data_dir.resolve())
    if settings.database.url:
        env["TENK_DATABASE_URL"] = settings.database.url
    if settings.redis.url:
        env["TENK_REDIS_URL"] = settings.redis.url
    fleet = Fleet(run_dir(settings), settings.port, env, apis=apis, workers=workers)
    return Topology(cluster_stores(settings), fleet)


def format_statuses(rows: list[MemberStatus]) -> str:
    table = [("NAME", "ROLE", "PID", "PORT", "STATE", "READY")]
    for r in rows:
        table.append((r.name, r.role, str(r.pid or "-"), str(r.port or "-"), "up" if r.up else "down", r.ready))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)
