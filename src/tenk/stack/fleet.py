"""N API nodes and M ingest workers on this machine, behind HAProxy on one front port.

Each API node is a `tenk serve` on a port of its own, with TENK_DRAIN_S set from the balancer's check
interval (`haproxy.drain_s_for`), so that a node told to stop leaves rotation before it stops
listening. Workers are `tenk worker` with fixed names (`worker-1`...), so that one started again
replays what its predecessor left pending. Every member is recorded in `<run dir>/members.json`:
`tenk down` and `tenk status`, run later from another process, find them there.

The nodes share one data directory, hence one dev key and one cursor secret: a page cursor signed
by one node is accepted by the next.
"""

from __future__ import annotations

import csv
import io
import os
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tenk.stack._ports import PortTakenError, ServerExitedError, free_port
from tenk.stack._process import http_status
from tenk.stack.haproxy import Backend, check_config, drain_s_for, haproxy_argv, haproxy_config
from tenk.stack.members import (
    Member,
    load_members,
    save_members,
    spawn_member,
    start_member,
    stop_members,
    wait_gone,
    wait_member_listening,
)

API_NAMES = ["tenk", "granian", "uvicorn", "gunicorn"]
# Generous: an API node starts in seconds, but a busy 2-core machine can make that a minute.
START_TIMEOUT_S = 120.0
_POLL_S = 0.05
_PORT_ATTEMPTS = 8


class FleetRunningError(RuntimeError):
    """A fleet recorded in this data directory still runs."""


def _tenk(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "tenk"), *args]


def http_ready(port: int, timeout: float = 1.0) -> bool:
    return http_status(f"http://127.0.0.1:{port}/ready", timeout) == 200


def in_rotation(stats_port: int) -> dict[str, bool]:
    """Node name -> whether the HAProxy with this stats port sends it requests now; empty if it is down."""
    # The standard library's client, not httpx (the lab's): `tenk up` runs on an install without the lab.
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{stats_port}/stats;csv", timeout=1.0) as answer:
            text = answer.read().decode()
    except (OSError, ValueError):
        return {}
    rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
    return {
        row["svname"]: row["status"] == "UP"
        for row in rows
        if row["pxname"] == "apis" and row["svname"] not in ("FRONTEND", "BACKEND")
    }


@dataclass
class Fleet:
    """`env` is what every tenk process gets: where Postgres and Redis are, keys, the data dir."""

    run_dir: Path
    front_port: int
    env: dict[str, str]
    apis: int = 2
    workers: int = 2
    drain_s: float = field(default_factory=drain_s_for)
    start_timeout_s: float = START_TIMEOUT_S

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir).resolve()

    @property
    def state_path(self) -> Path:
        return self.run_dir / "members.json"

    @property
    def url(self) -> str:
        """The front door: HAProxy."""
        return f"http://127.0.0.1:{self.front_port}"

    def members(self) -> list[Member]:
        return load_members(self.state_path)

    def member(self, name: str) -> Member:
        return next(m for m in self.members() if m.name == name)

    def _record(self, member: Member) -> None:
        others = [m for m in self.members() if m.name != member.name]
        save_members(self.state_path, [*others, member])

    # -- starting ---------------------------------------------------------------------------------

    def start(self) -> list[Member]:
        """Start every member (nodes first, the balancer once they are ready); returns them."""
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if any(m.running() for m in self.members()):
            raise FleetRunningError(f"a cluster recorded in {self.state_path} still runs; `tenk down` first")
        save_members(self.state_path, [])
        try:
            # Workers first: they listen on nothing, so they start alongside the nodes at no wait.
            for i in range(1, self.workers + 1):
                self._record(start_member(self._worker(f"worker-{i}"), self._worker_env(), self.start_timeout_s))
            self._start_nodes(self.apis)
            self._start_balancer()
        except BaseException:
            self.stop()
            raise
        return self.members()

    def _api(self, name: str, port: int) -> Member:
        return Member(
            name=name,
            role="api",
            argv=_tenk("serve", "--port", str(port)),
            port=port,
            log=str(self.run_dir / f"{name}.log"),
            cwd=os.getcwd(),
            names=API_NAMES,
        )

    def _api_env(self) -> dict[str, str]:
        # HAProxy's health checks and the fleet's own ask /ready without a key: it stays open on the nodes
        # (it names dependencies, nothing more). One metrics port for several nodes would be any node's.
        return {**self.env, "TENK_DRAIN_S": str(self.drain_s), "TENK_AUTH_READY": "false", "TENK_METRICS_PORT": "0"}

    def _start_apis(self, names: list[str], ports: list[int]) -> list[Member]:
        """Start these nodes together (start-up is mostly imports: in parallel it takes one's time), then
        wait until each answers /ready. Raises PortTakenError when another process took one's port."""
        spawned = [
            spawn_member(self._api(name, port), self._api_env()) for name, port in zip(names, ports, strict=True)
        ]
        for member, _ in spawned:
            self._record(member)
        for member, process in spawned:
            wait_member_listening(member, process, self.start_timeout_s)
            port = member.port
            assert port is not None
            self._wait(lambda: http_ready(port), f"{member.name} to answer /ready", member)  # noqa: B023
        return [member for member, _ in spawned]

    def _start_nodes(self, count: int) -> None:
        names = [f"api-{i}" for i in range(1, count + 1)]
        # A port found free can be taken before the node binds it: then start them all again elsewhere.
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self._start_apis(names, [free_port() for _ in names])
                return
            except PortTakenError:
                stop_members([m for m in self.members() if m.role == "api"], timeout=self.start_timeout_s)
                if attempt == _PORT_ATTEMPTS - 1:
                    raise

    def _worker(self, name: str) -> Member:
        return Member(
            name=name,
            role="worker",
            argv=_tenk("worker", "--name", name),
            port=None,
            log=str(self.run_dir / f"{name}.log"),
            cwd=os.getcwd(),
            names=["tenk"],
        )

    def _worker_env(self) -> dict[str, str]:
        # Several workers on one machine: a metrics port set for one would be taken by the next.
        return {**self.env, "TENK_INGEST_METRICS_PORT": "0"}

    def _start_balancer(self) -> None:
        backends = [Backend(m.name, m.port) for m in self.members() if m.role == "api" and m.port is not None]
        stats_port = free_port()
        config = self.run_dir / "haproxy.cfg"
        config.write_text(haproxy_config(self.front_port, backends, stats_port))
        check_config(config)
        member = Member(
            name="haproxy",
            role="lb",
            argv=haproxy_argv(config),
            port=self.front_port,
            log=str(self.run_dir / "haproxy.log"),
            cwd=os.getcwd(),
            names=["haproxy"],
        )
        self._record(start_member(member, dict(os.environ), self.start_timeout_s))
        (self.run_dir / "stats-port").write_text(f"{stats_port}\n")
        self._wait(lambda: all(self.in_rotation().values()), "HAProxy to see every node up")

    def _wait(self, condition: Callable[[], bool], what: str, member: Member | None = None) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not condition():
            if member is not None and not member.running():
                raise ServerExitedError(f"{member.name} exited while we waited for {what}; see {member.log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {self.start_timeout_s}s for {what}")
            time.sleep(_POLL_S)

    # -- while running ----------------------------------------------------------------------------

    def in_rotation(self) -> dict[str, bool]:
        """Node name -> whether HAProxy sends it requests now (its health checks pass); empty if it is down."""
        try:
            stats_port = int((self.run_dir / "stats-port").read_text())
        except (OSError, ValueError):
            return {}
        return in_rotation(stats_port)

    def restart(self, name: str) -> Member:
        """Stop one API node gracefully (it drains first) and start it again on its port, back in rotation."""
        old = self.member(name)
        if old.role != "api":
            raise ValueError(f"{name} is not an API node")
        stop_members([old], timeout=self.drain_s + self.start_timeout_s)
        wait_gone(old, self.start_timeout_s)
        assert old.port is not None
        (new,) = self._start_apis([name], [old.port])
        self._wait(lambda: self.in_rotation().get(name, False), f"HAProxy to take {name} back")
        return new

    # -- stopping ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Nodes and workers first (they drain and flush in parallel), then the balancer."""
        members = self.members()
        stop_members([m for m in members if m.role != "lb"], timeout=self.drain_s + 30)
        stop_members([m for m in members if m.role == "lb"], timeout=10)
        self.state_path.unlink(missing_ok=True)
        (self.run_dir / "stats-port").unlink(missing_ok=True)
