"""System calls a request of the api-4 mix costs each entry at a low fixed rate: `python -m
benchmarks.httparena.syscalls [ENTRY ...] [--requests N] [--rate R]`.

At a rate far below capacity every request wakes the server alone, so what it costs is mostly the
wake-up (epoll, the hand-offs between a server's threads, futexes and eventfds) that an in-process
instruction count (`benchmarks/budget/`) does not see. `strace -c -f` counts the calls of every thread of
the server's processes while a small client on CPU 1 sends the api-4 mix (HttpArena's templates, 5
requests a connection) at `--rate` requests a second, the server held to CPU 0. Counts, not time: the
calls a request makes do not move with the machine's load as their durations do. The server's idle
calls over the same span (timers) are counted too, and given apart.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.bench_httparena import READY_PATH, arena_postgres, entry_env
from benchmarks.httparena.arena import REQUESTS
from benchmarks.httparena.entries import VENV_BIN, entries
from benchmarks.httparena.profiles import PROFILES
from tenk.stack import start_http_server

_LINE = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def _templates() -> list[bytes]:
    """The api-4 mix's raw requests, in its order, `Host` kept (no placeholders in these)."""
    return [(REQUESTS / f"{name}.raw").read_bytes() for name in PROFILES["api-4"].templates]


def _read_response(conn: socket.socket, pending: bytearray) -> None:
    """One response off `conn` (Content-Length or chunked), whatever comes after it left in `pending`."""
    while True:
        head_end = pending.find(b"\r\n\r\n")
        if head_end >= 0:
            head = bytes(pending[:head_end]).lower()
            if not head.startswith(b"http/1.1 200"):
                raise SystemExit(f"unexpected answer: {head[:80]!r}")
            match = re.search(rb"content-length: *(\d+)", head)
            if match:
                end = head_end + 4 + int(match[1])
                if len(pending) >= end:
                    del pending[:end]
                    return
            elif b"transfer-encoding: chunked" in head:
                end = pending.find(b"\r\n0\r\n\r\n", head_end)
                if end >= 0:
                    del pending[: end + 7]
                    return
        chunk = conn.recv(65536)
        if not chunk:
            raise SystemExit("the server closed the connection")
        pending += chunk


def _paced(rate: float, count: int) -> Iterator[int]:
    """0..count-1, each at its slot of a fixed rate (open loop: a late request does not shift the rest)."""
    start = time.monotonic()
    for n in range(count):
        delay = start + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the client, not synchronising with the server
        yield n


def drive(port: int, count: int, rate: float, per_connection: int) -> None:
    """`count` requests of the mix, one connection per template turn as gcannon rotates them."""
    templates = _templates()
    conn: socket.socket | None = None
    pending = bytearray()
    for n in _paced(rate, count):
        if n % per_connection == 0:
            if conn is not None:
                conn.close()
            conn = socket.create_connection(("127.0.0.1", port))
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pending.clear()
            template = templates[(n // per_connection) % len(templates)]
        assert conn is not None
        conn.sendall(template)
        _read_response(conn, pending)
    if conn is not None:
        conn.close()


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    found = [pid]
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        found += _tree(int(child))
    return found


def _count(pids: list[int], seconds: float | None, work: object = None) -> dict[str, int]:
    """strace's call counts over every thread of `pids`, while `work()` runs (or for `seconds`)."""
    with tempfile.NamedTemporaryFile(prefix="strace-", suffix=".txt", delete=False) as out:
        path = Path(out.name)
    argv = ["strace", "-c", "-f", "-o", str(path)] + [arg for pid in pids for arg in ("-p", str(pid))]
    tracer = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # strace attaches without telling when it is done: a second is ample
    if callable(work):
        work()
    elif seconds:
        time.sleep(seconds)
    tracer.send_signal(signal.SIGINT)
    tracer.wait()
    calls: dict[str, int] = {}
    for line in path.read_text().splitlines():
        match = _LINE.match(line)
        if match and match[2] != "total":
            calls[match[2]] = int(match[1])
    path.unlink()
    return calls


def _command(name: str) -> list[str]:
    """An entry's command line, one worker; `tenk-uvicorn` is tenk's entry served as HttpArena's uvicorn one is."""
    if name == "tenk-uvicorn":
        folder = str(entries()["tenk"].folder)
        uvicorn = [str(VENV_BIN / "uvicorn"), "app:app", "--app-dir", folder, "--host", "127.0.0.1", "--port", "{port}"]
        return [*uvicorn, "--loop", "uvloop", "--http", "httptools", "--log-level", "critical", "--no-access-log"]
    entry = entries()[name]
    entry.prepare()
    return [part.replace("{workers}", "1") for part in entry.command()]


def measure(
    name: str, dsn: str, workdir: Path, count: int, rate: float, extra: dict[str, str]
) -> tuple[dict[str, int], dict[str, int]]:
    command = _command(name)
    server, base_url = start_http_server(
        name,
        lambda port: ["taskset", "-c", "0", *(part.replace("{port}", str(port)) for part in command)],
        lambda port: workdir / f"{name}-{port}.log",
        health_path=READY_PATH,
        env={**entry_env(dsn, workdir), "TENK_WORKERS": "1", **extra},
    )
    port = int(base_url.rsplit(":", 1)[1])
    try:
        per_connection = PROFILES["api-4"].requests_per_connection
        drive(port, 200, rate * 4, per_connection)  # warm: pools filled, code paths run once
        pids = _tree(server.process.pid)
        busy = _count(pids, None, lambda: drive(port, count, rate, per_connection))
        idle = _count(pids, count / rate)
        return busy, idle
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("entries", nargs="*", default=["tenk", "uvicorn"])
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="e.g. GRANIAN_LOOP=uvloop")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory(prefix="httparena-syscalls-") as folder:
        workdir = Path(folder)
        with arena_postgres(workdir) as dsn:
            for name in args.entries:
                busy, idle = measure(name, dsn, workdir, args.requests, args.rate, extra)
                total = sum(busy.values()) - sum(idle.values())
                print(
                    f"## {name}: {total / args.requests:.1f} calls a request (idle over the span: {sum(idle.values())})"
                )
                for call, calls in sorted(busy.items(), key=lambda kv: -kv[1])[:14]:
                    print(f"  {call:<16} {calls / args.requests:6.2f}  (idle {idle.get(call, 0)})")


if __name__ == "__main__":
    main()
