"""Child processes: starting one with its output in a log, waiting until it serves, and the servers we
leave running between CLI calls.

Processes named by a pidfile are signalled only when they are provably the server we started.

A pidfile outlives its process: after a crash or a reboot the PID it names can belong to anything, and
`tenk down` once killed an unrelated process that way. So a PID counts as ours only when the process
runs one of the expected executables, has its working directory in our data directory (Postgres and
Redis both chdir there), and, where the pidfile records it, started at the recorded time. Signals go
through psutil, which re-checks the start time, so a PID reused between the check and the signal is
not hit either.

Pidfiles and logs are read without following a symbolic link, and only when they are plain files (see
`tenk.stack._private.read_server_file`): a pidfile that names /etc/shadow, or a FIFO that blocks, is no pidfile.
"""

from __future__ import annotations

import http.client
import os
import stat
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from tenk.stack._ports import PortTakenError, ServerExitedError, free_port, listens_on, wait_listening
from tenk.stack._private import read_server_file, write_private

# Kernel start times and the second-resolution ones Postgres writes differ by rounding, never by more.
START_TIME_TOLERANCE_S = 2.0
# A log's tail is read from its last bytes, not the whole of a log that may be gigabytes.
LOG_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class Expected:
    """What our server looks like: executable names, working directory, and start time if known."""

    names: frozenset[str]
    cwd: Path
    started_at: float | None = None


def read_pid(pidfile: Path) -> int | None:
    try:
        return int((read_server_file(pidfile) or "").split()[0])
    except (ValueError, IndexError):
        return None


def write_pidfile(pidfile: Path, pid: int) -> None:
    """Record the PID with the start time the kernel gives it, for `owned_process` to check later."""
    started_at = psutil.Process(pid).create_time()
    write_private(pidfile, f"{pid}\n{started_at!r}\n")


def recorded_start(pidfile: Path, line: int = 1) -> float | None:
    try:
        return float((read_server_file(pidfile) or "").splitlines()[line])
    except (ValueError, IndexError):
        return None


def owned_process(pid: int | None, expected: Expected) -> psutil.Process | None:
    """The live process `pid` if it is the server described by `expected`, else None."""
    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if Path(proc.exe()).name not in expected.names and proc.name() not in expected.names:
            return None
        if Path(proc.cwd()).resolve() != expected.cwd.resolve():
            return None
        if expected.started_at is not None and abs(proc.create_time() - expected.started_at) > START_TIME_TOLERANCE_S:
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, FileNotFoundError):
        return None
    return proc


def spawn_detached(argv: list[str], log: Path, **kwargs: object) -> subprocess.Popen[bytes]:
    """Start a server in its own session so that it outlives the CLI that started it.

    umask 077: its log, data files and sockets are readable by the user it runs as, nobody else.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "ab") as out:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            umask=0o077,
            **kwargs,
        )


def stop_process(proc: psutil.Process | None, sig: int, timeout: float = 10.0) -> None:
    """Signal our server and wait for it to go; SIGKILL if it outlasts `timeout`."""
    if proc is None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout)
    except psutil.TimeoutExpired:
        try:
            proc.kill()
            proc.wait(timeout)
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass
    except psutil.NoSuchProcess:
        pass


def spawn_listening(
    name: str, argv: list[str], log: Path, port: int, timeout: float, **kwargs: object
) -> subprocess.Popen[bytes]:
    """`spawn_detached`, then wait until it listens on `port`. A server that exits or times out first is a
    RuntimeError carrying its log tail (one that times out is killed, not left half-started)."""
    process = spawn_detached(argv, log, **kwargs)
    try:
        wait_listening(process, port, timeout, name)
    except ServerExitedError as exc:
        raise RuntimeError(f"{exc}; log tail:\n{log_tail(log, 30)}") from None
    except TimeoutError as exc:
        process.kill()
        raise RuntimeError(f"{exc}; log tail:\n{log_tail(log, 30)}") from None
    return process


def log_tail(log: Path, lines: int = 40) -> str:
    """The last lines a child wrote, for error messages about it (a link or a FIFO is no log)."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "(no log)"
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "(no log)"
        size = os.fstat(fd).st_size
        file.seek(max(0, size - LOG_TAIL_BYTES))
        text = file.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Spawned:
    """A child process whose output goes to `log`."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log, lines)

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for it to end (TimeoutExpired if it outlasts `timeout`); its exit code."""
        self.process.terminate()
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye."""
        self.process.kill()
        self.process.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it outlasts `timeout`."""
        if self.process.poll() is None:
            try:
                self.terminate(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def spawn_logged(name: str, argv: list[str], log: Path, **popen: object) -> Spawned:
    """Start `argv` with stdout and stderr appended to `log` and no stdin."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(  # type: ignore[call-overload]
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **popen
        )
    return Spawned(name, process, log)


def http_status(url: str, timeout: float) -> int | None:
    """The status `url` answers a GET with, or None when it does not answer.

    Asked as curl asks (and HttpArena's validate.sh waits with curl): no `Connection: close`, which urllib
    always sends; the client closes once the answer is read. A server that closes on a request's own
    `Connection: close` takes a different path, and fastpysgi's ASGI server frees the connection there
    while its task still points at it: one such probe left it to crash on later requests
    (docs/httparena.md). Redirects are answers, not followed.
    """
    parts = urllib.parse.urlsplit(url)
    target = f"{parts.path or '/'}{'?' + parts.query if parts.query else ''}"
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        connection = kind(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    except ValueError:
        return None
    try:
        connection.request("GET", target)
        with connection.getresponse() as response:
            response.read()
            return int(response.status)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def wait_http_ok(
    url: str, timeout: float, process: subprocess.Popen[bytes] | None = None, accept_any: bool = False
) -> None:
    """Wait for a 200 (with `accept_any`, any answer) from `url`; with `process`, only once that process
    (or a child) is the one listening on the URL's port: a stranger's server there would answer too.

    Raises ServerExitedError when `process` exits first, TimeoutError after `timeout` seconds.
    """
    port = urllib.parse.urlsplit(url).port
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServerExitedError(f"exited with code {process.returncode} before {url} answered")
        if process is not None and port is not None and not listens_on(process.pid, port):
            time.sleep(0.05)
            continue
        status = http_status(url, timeout=1.0)
        if status == 200 or (status is not None and accept_any):
            return
        last = "no answer" if status is None else f"HTTP {status}"
        time.sleep(0.1)
    raise TimeoutError(f"{url} gave {last} for {timeout:.0f}s")


def start_http_server(
    name: str,
    argv_for: Callable[[int], list[str]],
    log_for: Callable[[int], Path],
    *,
    health_path: str = "/health",
    timeout: float = 60.0,
    port: int | None = None,
    attempts: int = 8,
    **popen: object,
) -> tuple[Spawned, str]:
    """Start a server on `port` or a free one and wait until it listens there and `health_path` answers 200.

    Returns it and its base URL. A free port can be taken before the server binds it: then it exits and,
    unless `port` was given, another port is tried. Any other failure raises RuntimeError with its log tail.
    """
    for attempt in range(1 if port is not None else attempts):
        chosen = port if port is not None else free_port()
        server = spawn_logged(name, argv_for(chosen), log_for(chosen), **popen)
        base_url = f"http://127.0.0.1:{chosen}"
        try:
            # Listening first: someone else's server on this port would answer the health check just as well.
            wait_listening(server.process, chosen, timeout, name)
            wait_http_ok(base_url + health_path, timeout, server.process)
        except PortTakenError:
            if port is None and attempt < attempts - 1:
                continue
            raise
        except (ServerExitedError, TimeoutError) as exc:
            server.stop()
            raise RuntimeError(f"{name}: {exc}\n--- last lines of {server.log} ---\n{server.log_tail()}") from None
        return server, base_url
    raise AssertionError("unreachable: the last attempt returns or raises")
