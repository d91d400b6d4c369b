"""Real services for the suite and the benchmarks: an embedded Postgres and Redis on free ports,
migrated and seeded."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import asyncpg

from harness.clients import TEST_API_KEY, TEST_CURSOR_SECRET
from harness.deadlines import timed_start
from tenk.ops.api_keys import digest
from tenk.platform.fast_paths import FastPath, runs
from tenk.settings import Settings
from tenk.stack import (
    EmbeddedPostgres,
    EmbeddedRedis,
    free_port,
    start_on_free_port,
)
from tenk.stack._ports import PortTakenError, is_ephemeral, port_is_bindable
from tenk.stack.migrate import migrate
from tenk.stack.redis_cluster import bus_port
from tenk.stack.seed import seed

SEED_PRODUCTS = 2_000
SEED_TASKS = 300
VENV_BIN = Path(sys.executable).parent


@dataclass
class Stack:
    root: Path
    pg: EmbeddedPostgres
    redis: EmbeddedRedis
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self, **overrides: str) -> dict[str, str]:
        """Environment for a tenk process (server, worker) pointed at this stack."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TENK_")}
        env.update(
            {
                "TENK_DATABASE_URL": self.pg.url,
                "TENK_REDIS_URL": self.redis.url,
                "TENK_API_KEYS": digest(TEST_API_KEY),
                "TENK_CURSOR_SECRET": TEST_CURSOR_SECRET,
                "TENK_DATA_DIR": str(self.root / "data"),
                "TENK_LOG_LEVEL": "WARNING",
                # The suite's ladders run unbudgeted (see tests/conftest.py): "auto", the default under 4
                # cores, would probe every rung first.
                "TENK_LAB_CPU_BUDGET": os.environ.get("TENK_LAB_CPU_BUDGET", "none"),
                # `make test-stock`: the servers the suite starts serve through the stock paths too.
                "TENK_STOCK_PATHS": stock_paths(),
            }
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def env_over_tcp(self, **overrides: str) -> dict[str, str]:
        """`env`, with Postgres and Redis reached on their ports: for a process that cannot see this machine's
        sockets (one in a container), as a client outside tenk would reach them."""
        pg, redis = self.pg, self.redis
        return self.env(
            TENK_DATABASE_URL=f"postgresql://{pg.app_role}:{pg.app_password}@127.0.0.1:{pg.port}/{pg.database}",
            TENK_REDIS_URL=f"redis://:{redis.password}@127.0.0.1:{redis.port}/0",
            **overrides,
        )

    def settings(self, **overrides: object) -> Settings:
        """The settings tree for an app on this stack. A branch's overrides are merged into it:
        `stack.settings(ingest={"max_backlog": 10})` keeps the other ingest settings as they are."""
        values: dict[str, object] = {
            "database": {"url": self.pg.url},
            "redis": {"url": self.redis.url},
            "api_keys": [digest(TEST_API_KEY)],
            "cursor_secret": TEST_CURSOR_SECRET,
            "data_dir": self.root / "data",
            "log_level": "WARNING",
            "stock_paths": stock_paths(),
        }
        # Settings ignores unknown names (the environment holds other TENK_* too): a misspelt or flat
        # name here would silently test the defaults instead.
        unknown = set(overrides) - set(Settings.model_fields)
        assert not unknown, f"not settings: {sorted(unknown)} (branches take dicts: redis={{'url': ...}})"
        return Settings.model_validate(_merged(values, overrides))

    def stop(self) -> None:
        self.pg.stop()
        self.redis.stop()


def stock_paths() -> str:
    """TENK_STOCK_PATHS as the suite runs with it (`make test-stock`), for every app and server it makes: the
    environment's other TENK_* variables are kept from them, and a settings tree built here reads none."""
    return os.environ.get("TENK_STOCK_PATHS", "0")


def fast_path_serves(path: FastPath) -> bool:
    """Whether `path` serves in the apps and servers the suite makes, decided as the app decides it: the
    `stock_paths` setting they are given, and the libraries' installed versions."""
    return runs(path, stock_paths=Settings.model_validate({"stock_paths": stock_paths()}).stock_paths)


def _merged(base: dict[str, object], overrides: dict[str, object]) -> dict[str, object]:
    merged = dict(base)
    for name, value in overrides.items():
        below = merged.get(name)
        if isinstance(below, dict) and isinstance(value, dict):
            merged[name] = _merged(below, value)
        else:
            merged[name] = value
    return merged


def start_stack(root: Path, products: int = SEED_PRODUCTS, tasks: int = SEED_TASKS, **redis_kwargs: object) -> Stack:
    # A port can be taken between choosing and binding it (other runs share the machine): retry on another.
    with timed_start():
        pg = start_on_free_port(lambda port: EmbeddedPostgres(root / "postgres", port))
    with timed_start():
        redis = start_on_free_port(lambda port: EmbeddedRedis(root / "redis", port, **redis_kwargs))  # type: ignore[arg-type]
    asyncio.run(migrate(pg.url))
    asyncio.run(seed(pg.url, products, tasks))
    return Stack(root, pg, redis)


async def fresh_database(stack: Stack, name: str) -> str:
    """A new, empty database on the stack's Postgres, owned by the app's role; its URL."""
    # Creating a database is the superuser's; the app's role owns it, as it owns the application database.
    admin = await asyncpg.connect(stack.pg.superuser_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.execute(f'CREATE DATABASE "{name}" OWNER "{stack.pg.app_role}"')
    finally:
        await admin.close()
    return stack.pg.url_for(name)


def _short_tmp(prefix: str) -> Path:
    # Unix socket paths are limited to ~100 bytes; pytest's tmp paths can be longer.
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class _ServerGroup(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...


_Group = TypeVar("_Group", bound=_ServerGroup)


def _started_on_fresh_ports(make: Callable[[int], _Group], attempts: int = 3) -> _Group:
    """`make(attempt).start()`; ports can be taken between choosing and binding them, so a group that
    fails to start is stopped and made again, on fresh ports."""
    for attempt in range(attempts - 1):
        group = make(attempt)
        try:
            group.start()
        except (PortTakenError, RuntimeError, TimeoutError):
            group.stop()
            continue
        return group
    group = make(attempts - 1)
    try:
        group.start()
    except (PortTakenError, RuntimeError, TimeoutError):
        group.stop()
        raise
    return group


@contextmanager
def own_stack(prefix: str = "tenk-priv-") -> Iterator[Stack]:
    """A small stack nobody else uses: for tests that stop a server, or change and delete data at will."""
    root = _short_tmp(prefix)
    started = start_stack(root, products=200, tasks=50)
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(root, ignore_errors=True)


def _free(port: int, cluster_bus: bool) -> bool:
    if not port_is_bindable(port):
        return False
    return not cluster_bus or (not is_ephemeral(bus_port(port)) and port_is_bindable(bus_port(port)))


def free_port_run(length: int, cluster_bus: bool = False) -> int:
    """A port p with p .. p + length - 1 all free: the cluster's stores sit beside the embedded ports.
    With `cluster_bus`, each port's Redis Cluster bus port (`bus_port`) must be free as well, and
    outside the ephemeral range, where an outgoing connection could take it before the node binds it."""
    for _ in range(1_000):
        base = free_port()
        ports = range(base, base + length)
        if base + length < 65535 and all(_free(port, cluster_bus) for port in ports):
            return base
    raise AssertionError(f"no run of {length} free ports found")
