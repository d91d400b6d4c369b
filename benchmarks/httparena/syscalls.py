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

from benchmarks.bench_httparena import READY_PATH, arena_postgres, entry_env, static_dir
from benchmarks.httparena.arena import REQUESTS
from benchmarks.httparena.entries import entries
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


def switches(pids: list[int]) -> int:
    """Voluntary context switches (a thread that waits) so far, over every thread of `pids`: the wake-ups."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


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
    """An entry's command line, one worker; `tenk-granian` is tenk's entry on granian (TENK_SERVER)."""
    entry = entries()["tenk" if name == "tenk-granian" else name]
    entry.prepare()
    command = [part.replace("{workers}", "1") for part in entry.command()]
    return ["env", "TENK_SERVER=granian", *command] if name == "tenk-granian" else command


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
        before = switches(pids)
        drive(port, count, rate, per_connection)
        print(f"## {name}: {(switches(pids) - before) / count:.2f} voluntary context switches a request, untraced")
        busy = _count(pids, None, lambda: drive(port, count, rate, per_connection))
        idle = _count(pids, count / rate)
        return busy, idle
    finally:
        server.stop()


def _callgrind_total(folder: Path) -> int:
    """The instructions of every process of the server, start to end."""
    total = 0
    for dump in folder.glob("callgrind.*"):
        match = re.search(r"^summary: (\d+)$", dump.read_text(errors="replace"), re.MULTILINE)
        total += int(match[1]) if match else 0
    return total


def _whole_run(name: str, dsn: str, workdir: Path, count: int, rate: float, extra: dict[str, str]) -> int:
    """Instructions of one server's whole life under callgrind (start, `count` requests, stop)."""
    folder = Path(tempfile.mkdtemp(prefix=f"callgrind-{name}-", dir=workdir))
    valgrind = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={folder}/callgrind.%p"]
    command = _command(name)
    server, base_url = start_http_server(
        name,
        lambda port: ["taskset", "-c", "0", *valgrind, *(part.replace("{port}", str(port)) for part in command)],
        lambda port: workdir / f"{name}-callgrind-{port}.log",
        health_path=READY_PATH,
        timeout=600,
        env={**entry_env(dsn, workdir), "TENK_WORKERS": "1", **extra},
    )
    try:
        drive(int(base_url.rsplit(":", 1)[1]), count, rate, PROFILES["api-4"].requests_per_connection)
    finally:
        server.stop()
    return _callgrind_total(folder)


def instructions(name: str, dsn: str, workdir: Path, count: int, rate: float, extra: dict[str, str]) -> float:
    """User-space instructions a request costs the whole server (HTTP server included): callgrind over every
    process of it, for two runs that differ only in their number of requests, so that start-up and
    shutdown cancel out. (Switching callgrind on for the requests alone, by `callgrind_control`, does not
    reach granian's processes.) The timers of the extra seconds the longer run lasts are in the figure."""
    few = _whole_run(name, dsn, workdir, 40, rate, extra)
    many = _whole_run(name, dsn, workdir, 40 + count, rate, extra)
    return (many - few) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("entries", nargs="*", default=["tenk", "uvicorn"])
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="e.g. GRANIAN_LOOP=uvloop")
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead of system calls")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory(prefix="httparena-syscalls-") as folder:
        workdir = Path(folder)
        with arena_postgres(workdir) as dsn, static_dir():  # the fastapi entry mounts /data/static
            for name in args.entries:
                if args.callgrind:
                    figure = instructions(name, dsn, workdir, args.requests, args.rate, extra)
                    print(f"## {name}: {figure:,.0f} instructions a request, the whole server")
                    continue
                busy, idle = measure(name, dsn, workdir, args.requests, args.rate, extra)
                total = sum(busy.values()) - sum(idle.values())
                print(
                    f"## {name}: {total / args.requests:.1f} calls a request (idle over the span: {sum(idle.values())})"
                )
                for call, calls in sorted(busy.items(), key=lambda kv: -kv[1])[:14]:
                    print(f"  {call:<16} {calls / args.requests:6.2f}  (idle {idle.get(call, 0)})")


if __name__ == "__main__":
    main()
