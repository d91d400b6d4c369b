from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil


def read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def spawn_detached(argv: list[str], log: Path, **kwargs: object) -> subprocess.Popen[bytes]:
    """Start a server in its own session so that it outlives the CLI that started it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **kwargs,
        )


def stop_pid(pid: int | None, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    if not pid_alive(pid):
        return
    assert pid is not None
    try:
        os.kill(pid, sig)
        proc = psutil.Process(pid)
        proc.wait(timeout)
    except psutil.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, psutil.NoSuchProcess):
        pass
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
