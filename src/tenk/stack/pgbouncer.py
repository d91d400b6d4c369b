"""PgBouncer in transaction mode in front of a Postgres, as a platform's pooler would be (RDS Proxy,
Supavisor): each transaction may run on another server connection, so a client must keep no session
state (see `tenk.platform.connections.pooler_connect_kwargs`, and TENK_DATABASE_POOLER=transaction).

The binary is Debian's `pgbouncer` (`make system-deps` installs it as root). Clients authenticate with
SCRAM against `<data dir>/userlist.txt` (0600), which holds the upstream role's password: PgBouncer
needs the password itself to log in to Postgres with SCRAM on the client's behalf. It listens on
127.0.0.1 and on a Unix socket in `sock/` (0700, the server's own directory); `url` names the socket,
and PgBouncer reaches Postgres through Postgres's own (`upstream_host` is its directory), so the
password crosses no port another local user could take (see `tenk.stack._sockets`). As root it runs
as `tenk-pg`, like Postgres (it refuses root).
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
from dataclasses import dataclass
from pathlib import Path

import psutil

from tenk.stack._layout import InDataDir
from tenk.stack._ports import PortTakenError, port_is_open
from tenk.stack._private import (
    make_private,
    require_traversable,
    run_as_server_user,
    server_owned_dir,
    server_user,
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
from tenk.stack._sockets import addressable, conninfo_value, postgres_url

INSTALL_HINT = "pgbouncer is not installed: `apt-get install pgbouncer` (or `make system-deps` as root)"


class PgBouncerMissingError(RuntimeError):
    pass


def pgbouncer_path() -> str:
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise PgBouncerMissingError(INSTALL_HINT)
    return found


def _quoted(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


@dataclass
class LocalPgBouncer:
    """`data_dir` is its own directory (e.g. `<tenk data dir>/pgbouncer`); `upstream_host` is libpq's host,
    the directory of Postgres's socket; `user`/`password` are the upstream role's, which clients use too."""

    data_dir: Path
    port: int
    upstream_host: str
    upstream_port: int
    user: str
    password: str
    database: str = "tenk"
    # Server connections per (database, user): what the pooler multiplexes every client onto.
    pool_size: int = 20
    max_client_conn: int = 1000

    config_path = InDataDir("pgbouncer.ini")
    auth_file = InDataDir("userlist.txt")
    pidfile = InDataDir("pgbouncer.pid")
    log_path = InDataDir("pgbouncer.log")
    socket_dir = InDataDir("sock")

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()

    @property
    def socket_host(self) -> Path:
        """The directory of its Unix socket as it and its clients name it (see `tenk.stack._sockets`)."""
        return addressable(self.socket_dir, f".s.PGSQL.{self.port}")

    @property
    def url(self) -> str:
        return postgres_url(self.user, self.password, self.database, self.socket_host, self.port)

    def config(self) -> str:
        host = conninfo_value(self.upstream_host)
        upstream = f"host={host} port={self.upstream_port} dbname={self.database}"
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": str(self.socket_host),
            "unix_socket_mode": "0700",
            "auth_type": "scram-sha-256",
            "auth_file": str(self.auth_file),
            "pool_mode": "transaction",
            "default_pool_size": str(self.pool_size),
            "max_client_conn": str(self.max_client_conn),
            # psycopg and JDBC send it; PgBouncer would refuse the connection over it.
            "ignore_startup_parameters": "extra_float_digits",
            # Our clients may wait out a restart of Postgres behind us; don't drop them early.
            "query_wait_timeout": "30",
            "server_login_retry": "1",
            "log_connections": "0",
            "log_disconnections": "0",
        }
        lines = ["[databases]", f"{self.database} = {upstream}", "", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        return "\n".join(lines) + "\n"

    def write_config(self) -> dict[str, int]:
        """Config and auth file, private to whoever runs the server; the `subprocess` arguments for that."""
        make_private(self.data_dir.parent, server_may_enter=True)
        make_private(self.data_dir, server_may_enter=True)
        run_as = run_as_server_user()
        for path, text in (
            (self.config_path, self.config()),
            (self.auth_file, f"{_quoted(self.user)} {_quoted(self.password)}\n"),
        ):
            path.touch(mode=0o600)
            path.chmod(0o600)
            path.write_text(text)
            if run_as:
                os.chown(path, run_as["user"], run_as["group"])
        self.log_path.touch(mode=0o600)
        if run_as:
            os.chown(self.log_path, run_as["user"], run_as["group"])
            require_traversable(self.data_dir, server_user(), "the data directory")
        server_owned_dir(self.socket_dir)
        return run_as

    def process(self) -> psutil.Process | None:
        expected = Expected(frozenset({"pgbouncer"}), self.data_dir, recorded_start(self.pidfile))
        return owned_process(read_pid(self.pidfile), expected)

    def running(self) -> bool:
        return self.process() is not None

    def start(self, timeout: float = 15.0) -> bool:
        """Start it; returns False when ours was already running (its config reloaded)."""
        binary = pgbouncer_path()
        if (proc := self.process()) is not None:
            self.write_config()
            if self._has_socket():
                proc.send_signal(signal.SIGHUP)
                return False
            # Started by an older tenk, before it had its socket: PgBouncer reads unix_socket_dir at start only.
            self.stop()
        if port_is_open(self.port):
            raise PortTakenError(f"port {self.port} is taken by another process")
        run_as = self.write_config()
        # cwd: the data dir, which is how `process()` later knows the pid is ours.
        process = spawn_listening(
            "pgbouncer", [binary, str(self.config_path)], self.log_path, self.port, timeout, cwd=self.data_dir, **run_as
        )
        write_pidfile(self.pidfile, process.pid)
        return True

    def _has_socket(self) -> bool:
        try:
            return stat.S_ISSOCK(os.lstat(self.socket_host / f".s.PGSQL.{self.port}").st_mode)
        except FileNotFoundError:
            return False

    def stop(self) -> None:
        # SIGINT: "safe shutdown", after the transactions in flight.
        stop_process(self.process(), signal.SIGINT)

    def kill(self) -> None:
        stop_process(self.process(), signal.SIGKILL)

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)
