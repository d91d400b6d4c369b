"""Starting and stopping what a rung measures: the target (pinned to its CPU set), the mock upstream
and ingest workers (on the other cores), and the embedded stack.

Everything started goes into a `ProcessSet`, whose exit stops it all, on errors and Ctrl-C too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from tenk.lab.errors import LabError, NotReadyError
from tenk.lab.generator import pinned
from tenk.lab.ladder import RungConfig
from tenk.serving import server_argv
from tenk.settings import ServerName, Settings
from tenk.stack import EmbeddedPostgres, EmbeddedRedis, free_port

READY_TIMEOUT_S = 45.0
STOP_TIMEOUT_S = 15.0


def _tenk(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "tenk"), *args]


def other_cpus(target_cpus: str) -> str | None:
    """Every CPU this process may use that the target does not: the generator's and helpers' share."""
    taken = _expand(target_cpus)
    rest = sorted(os.sched_getaffinity(0) - taken)
    return ",".join(str(c) for c in rest) if rest else None


def cpu_set(cpus: str) -> set[int]:
    return _expand(cpus)


def _expand(cpus: str) -> set[int]:
    out: set[int] = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


@dataclass
class Started:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class ProcessSet:
    """Processes the lab started; `stop_all` ends each one (and its children), newest first."""

    log_dir: Path
    started: list[Started] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: Mapping[str, str], cpus: str | None) -> Started:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with log.open("ab") as out:
            out.write(f"$ {' '.join(pinned(argv, cpus))}\n".encode())
            out.flush()
            process = subprocess.Popen(
                pinned(argv, cpus),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                # Its own process group: Ctrl-C in the terminal reaches the lab, which then stops
                # these in order, instead of every child dying at once mid-measurement.
                start_new_session=True,
            )
        started = Started(name, process, log)
        self.started.append(started)
        return started

    def stop(self, item: Started) -> None:
        if item.process.poll() is None:
            try:
                children = psutil.Process(item.pid).children(recursive=True)
            except psutil.Error:
                children = []
            item.process.send_signal(signal.SIGTERM)
            try:
                item.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                item.process.kill()
                item.process.wait()
            for child in children:
                with suppress(psutil.Error):
                    child.kill()
        if item in self.started:
            self.started.remove(item)

    def stop_all(self) -> None:
        for item in reversed(list(self.started)):
            self.stop(item)


@contextmanager
def process_set(log_dir: Path) -> Iterator[ProcessSet]:
    processes = ProcessSet(log_dir)
    # SIGTERM (from a CI runner, say) is turned into the same clean exit as Ctrl-C.
    previous = signal.getsignal(signal.SIGTERM)
    if _main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield processes
    finally:
        processes.stop_all()
        if _main_thread():
            signal.signal(signal.SIGTERM, previous)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def wait_ready(item: Started, url: str, timeout_s: float = READY_TIMEOUT_S, accept_any: bool = False) -> None:
    """Poll `url` until it answers 200 (or anything, with `accept_any`); else raise with the log tail."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if item.process.poll() is not None:
            raise NotReadyError(
                f"{item.name} exited with code {item.process.returncode} before {url} answered.\n"
                f"--- last lines of {item.log} ---\n{item.log_tail()}"
            )
        try:
            response = httpx.get(url, timeout=1.0)
            if response.status_code == 200 or accept_any:
                return
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last = exc.__class__.__name__
        time.sleep(0.2)
    raise NotReadyError(
        f"{item.name} did not become ready: {url} gave {last} for {timeout_s:.0f}s.\n"
        f"--- last lines of {item.log} ---\n{item.log_tail()}"
    )


def target_app(config: RungConfig) -> str:
    if config.target == "tenk":
        return "tenk.app:create_app"
    if config.target.startswith("baseline:"):
        return f"tenk.lab.baselines.{config.target.split(':', 1)[1]}:app"
    return config.target


def target_argv(config: RungConfig, port: int) -> list[str]:
    argv = server_argv(
        target_app(config),
        config.server,  # type: ignore[arg-type]
        host="127.0.0.1",
        port=port,
        workers=config.workers,
        factory=config.factory,
        access_log=config.access_log,
    )
    server: ServerName = config.server  # type: ignore[assignment]
    if server in ("uvicorn", "granian") and "--loop" in argv:
        argv[argv.index("--loop") + 1] = config.loop
    if server == "uvicorn" and "--http" in argv:
        argv[argv.index("--http") + 1] = config.http
    return argv


@dataclass
class StackInfo:
    env: dict[str, str]
    started: list[EmbeddedPostgres | EmbeddedRedis]
    pids: list[int]


def stack_settings(env: Mapping[str, str]) -> Settings:
    names = {
        "database_url": "TENK_DATABASE_URL",
        "redis_url": "TENK_REDIS_URL",
        "data_dir": "TENK_DATA_DIR",
        "pg_port": "TENK_PG_PORT",
        "redis_port": "TENK_REDIS_PORT",
    }
    return Settings(**{name: env[var] for name, var in names.items() if var in env})  # type: ignore[arg-type]


def ensure_stack(env: Mapping[str, str], helper_cpus: str | None) -> StackInfo:
    """Postgres and Redis up, migrated and seeded (idempotent, as `tenk up`); external URLs are used as they are.

    Embedded servers are moved onto the helpers' cores, so they never share the target's CPU.
    """
    from tenk.stack.migrate import migrate
    from tenk.stack.seed import seed

    settings = stack_settings(env)
    started: list[EmbeddedPostgres | EmbeddedRedis] = []
    pids: list[int] = []
    servers: list[EmbeddedPostgres | EmbeddedRedis] = []
    if not settings.database_url:
        servers.append(EmbeddedPostgres(settings.data_dir / "postgres", settings.pg_port))
    if not settings.redis_url:
        servers.append(EmbeddedRedis(settings.data_dir / "redis", settings.redis_port))
    for server in servers:
        try:
            if server.start():
                started.append(server)
        except Exception as exc:
            raise LabError(f"could not start the embedded {server.__class__.__name__}: {exc}") from exc
        pid = server.pid()
        if pid is not None:
            pids.append(pid)
    try:
        asyncio.run(migrate(settings.resolved_database_url))
        asyncio.run(seed(settings.resolved_database_url, 100_000, 10_000))
    except Exception as exc:
        raise LabError(f"could not migrate/seed {settings.resolved_database_url}: {exc}") from exc
    if helper_cpus:
        pin_tree(pids, helper_cpus)
    return StackInfo(
        {
            "TENK_DATABASE_URL": settings.resolved_database_url,
            "TENK_REDIS_URL": settings.resolved_redis_url,
            "TENK_DATA_DIR": str(settings.data_dir),
        },
        started,
        pids,
    )


def pin_tree(pids: list[int], cpus: str) -> None:
    """Pin processes we did not start (Postgres forks a backend per connection; they inherit this)."""
    wanted = sorted(_expand(cpus))
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                proc.cpu_affinity(wanted)
        except psutil.Error:
            continue


def start_upstream(processes: ProcessSet, config: RungConfig, cpus: str | None, env: Mapping[str, str]) -> str:
    port = free_port()
    up = config.upstream
    argv = _tenk(
        "mock-upstream", "--host", "127.0.0.1", "--port", str(port),
        "--p50-ms", f"{up['p50_ms']:g}", "--p99-ms", f"{up['p99_ms']:g}",
        "--error-rate", f"{up['error_rate']:g}", "--hang-rate", f"{up['hang_rate']:g}", "--seed", "1",
    )  # fmt: skip
    item = processes.start("mock-upstream", argv, env, cpus)
    url = f"http://127.0.0.1:{port}"
    wait_ready(item, url + "/health")
    return url


def start_workers(processes: ProcessSet, count: int, cpus: str | None, env: Mapping[str, str]) -> None:
    items = [
        processes.start(f"worker-{i + 1}", _tenk("worker", "--name", f"lab-{i + 1}"), env, cpus) for i in range(count)
    ]
    time.sleep(1.0 if items else 0)
    for item in items:
        if item.process.poll() is not None:
            raise NotReadyError(
                f"{item.name} exited with code {item.process.returncode}.\n"
                f"--- last lines of {item.log} ---\n{item.log_tail()}"
            )


def start_target(processes: ProcessSet, config: RungConfig, env: Mapping[str, str]) -> tuple[Started, str]:
    port = free_port()
    item = processes.start("target", target_argv(config, port), env, config.cpus)
    base = f"http://127.0.0.1:{port}"
    # tenk and the baselines serve /health; an arbitrary app only has to answer at all.
    wait_ready(item, base + "/health", accept_any=not (config.is_tenk or config.target.startswith("baseline:")))
    return item, base
