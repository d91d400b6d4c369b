"""Processes a topology starts and later stops: each recorded with what proves it is still ours.

`tenk up --topology cluster` returns while its API nodes, workers and load balancer run on; `tenk down`
and `tenk status` come later, from another process. So every member is written to a JSON file in the
data directory, and a recorded PID is trusted only while the process behind it still matches what
was recorded (executable name, working directory, start time; see `tenk.stack._process`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from tenk.stack._ports import wait_listening
from tenk.stack._process import Expected, owned_process, spawn_detached


@dataclass(frozen=True)
class Member:
    """One process of a topology: `role` is what it does (api, worker, lb), `name` tells it apart."""

    name: str
    role: str
    argv: list[str]
    port: int | None
    log: str
    cwd: str
    names: list[str]
    pid: int | None = None
    started_at: float | None = None

    def process(self) -> psutil.Process | None:
        expected = Expected(frozenset(self.names), Path(self.cwd), self.started_at)
        return owned_process(self.pid, expected)

    def running(self) -> bool:
        return self.process() is not None


def spawn_member(member: Member, env: dict[str, str]) -> tuple[Member, subprocess.Popen[bytes]]:
    """Start `member` detached (it outlives the CLI); return it with its PID, and its process handle."""
    process = spawn_detached(member.argv, Path(member.log), env=env, cwd=member.cwd)
    started = Member(**{**asdict(member), "pid": process.pid, "started_at": psutil.Process(process.pid).create_time()})
    return started, process


def wait_member_listening(member: Member, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until a spawned member listens on its port; kill it and raise if it does not.

    Raises PortTakenError when another process holds its port, ServerExitedError when it exits first.
    """
    if member.port is None:
        return
    try:
        wait_listening(process, member.port, timeout, member.name)
    except BaseException:
        _kill(process)
        raise


def start_member(member: Member, env: dict[str, str], timeout: float) -> Member:
    """`spawn_member`, then `wait_member_listening`."""
    started, process = spawn_member(member, env)
    wait_member_listening(started, process, timeout)
    return started


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def stop_members(members: list[Member], timeout: float) -> None:
    """SIGTERM them all at once (API nodes drain in parallel), wait, and SIGKILL what outlasts `timeout`."""
    running = [proc for proc in (m.process() for m in members) if proc is not None]
    for proc in running:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(running, timeout=timeout)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=timeout)


def wait_gone(member: Member, timeout: float) -> None:
    """Wait until `member`'s process has exited; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    while member.running():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{member.name} (pid {member.pid}) still runs after {timeout}s")
        time.sleep(0.05)


def save_members(path: Path, members: list[Member]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps([asdict(m) for m in members], indent=2))
    # Atomic: a `tenk status` reading meanwhile sees the old list or the new one, never half of one.
    os.replace(temporary, path)


def load_members(path: Path) -> list[Member]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    return [Member(**item) for item in raw]
