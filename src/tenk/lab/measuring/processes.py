"""Starting and stopping what a rung measures: the target (pinned to its CPU set), the mock upstream
and ingest workers (on the other cores), and the embedded stack.

Everything started goes into a `ProcessSet`, whose exit stops it all, on errors and Ctrl-C too.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import psutil

from tenk.interrupts import run, sigterm_as_ctrl_c
from tenk.lab.cpus import cpu_set, pin_tree
from tenk.lab.definition.ladder import RungConfig
from tenk.lab.driving.generator import pinned
from tenk.lab.errors import LabError, NotReadyError
from tenk.lab.measuring.cpubudget import CpuBudget
from tenk.lab.targets.baselines import WSGI_BASELINES
from tenk.lab.targets.mock_upstream.process import new_admin_token
from tenk.lab.targets.mock_upstream.server import ADMIN_TOKEN_ENV
from tenk.serving import server_argv
from tenk.settings import ServerName, Settings
from tenk.stack import (
    EmbeddedPostgres,
    EmbeddedRedis,
    ServerExitedError,
    Spawned,
    free_port,
    spawn_logged,
    wait_http_ok,
)

READY_TIMEOUT_S = 45.0
STOP_TIMEOUT_S = 15.0


def _tenk(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "tenk"), *args]


# What the lab starts: a child with its output in a log of its own.
Started = Spawned


@dataclass
class ProcessSet:
    """Processes the lab started; `stop_all` ends each one (and its children), newest first."""

    log_dir: Path
    started: list[Started] = field(default_factory=list)

    def start(
        self, name: str, argv: list[str], env: Mapping[str, str], cpus: str | None, budget: CpuBudget | None = None
    ) -> Started:
        """Start `argv` on `cpus`, inside `budget`'s cgroup when one is given (its children with it)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        command = pinned(argv, cpus)
        if budget is not None:
            command = budget.entered(command)
        with log.open("ab") as out:
            out.write(f"$ {' '.join(command)}\n".encode())
        # Its own process group: Ctrl-C in the terminal reaches the lab, which then stops
        # these in order, instead of every child dying at once mid-measurement.
        started = spawn_logged(name, command, log, env=dict(env), start_new_session=True)
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


def stop_leftover_children() -> None:
    """Kill what this process still has running below it once an interrupt has unwound a run.

    The run stops everything it knows it started; a child forked in the instant the interrupt arrived
    (exec'd, but its Popen not yet returned to the code that would stop it) is known to nobody. Seen on
    a loaded machine: a k6 left running after `interrupted: every process ... stopped`.
    """
    children = psutil.Process().children(recursive=True)
    for child in children:
        with suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(children, timeout=STOP_TIMEOUT_S)


@contextmanager
def process_set(log_dir: Path) -> Iterator[ProcessSet]:
    processes = ProcessSet(log_dir)
    with sigterm_as_ctrl_c():
        try:
            yield processes
        finally:
            processes.stop_all()


def wait_ready(item: Started, url: str, timeout_s: float = READY_TIMEOUT_S, accept_any: bool = False) -> None:
    """Wait until `item` listens and `url` answers 200 (or anything, with `accept_any`); else raise with its log."""
    try:
        wait_http_ok(url, timeout_s, item.process, accept_any=accept_any)
    except (ServerExitedError, TimeoutError) as exc:
        tail = f"--- last lines of {item.log} ---\n{item.log_tail()}"
        raise NotReadyError(f"{item.name} {_not_ready(exc)}.\n{tail}") from None


def _not_ready(exc: Exception) -> str:
    return str(exc) if isinstance(exc, ServerExitedError) else f"did not become ready: {exc}"


def target_app(config: RungConfig) -> str:
    if config.target == "tenk":
        return "tenk.app:create_app"
    if config.target.startswith("baseline:"):
        return f"tenk.lab.targets.baselines.{config.target.split(':', 1)[1]}:app"
    return config.target


def target_argv(config: RungConfig, port: int, env: Mapping[str, str]) -> list[str]:
    argv = server_argv(
        target_app(config),
        config.server,  # type: ignore[arg-type]
        host="127.0.0.1",
        port=port,
        workers=config.workers,
        factory=config.factory,
        access_log=config.access_log,
        traced=bool(env.get("TENK_OPS_OTEL_ENDPOINT")),
    )
    server: ServerName = config.server  # type: ignore[assignment]
    if server in ("uvicorn", "granian") and "--loop" in argv:
        argv[argv.index("--loop") + 1] = config.loop
    if server == "uvicorn" and "--http" in argv:
        argv[argv.index("--http") + 1] = config.http
    if server == "gunicorn" and config.target in WSGI_BASELINES:
        argv[argv.index("--worker-class") + 1] = "sync"
    return argv


class Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass
class StackInfo:
    env: dict[str, str]
    started: list[Stoppable]  # what the lab started, and so stops: servers, or a cluster's stores
    pids: dict[str, int]  # "postgres" (the postmaster) and "redis", when embedded
    restored: int = 0  # seeded products that were missing or changed, and were put back


@contextmanager
def stopped_on_failure(started: Sequence[Stoppable]) -> Iterator[None]:
    """Stop, newest first, what a failing start-up had started: a run that cannot begin leaves no servers behind."""
    try:
        yield
    except BaseException:
        for server in reversed(started):
            server.stop()
        raise


def stack_settings(env: Mapping[str, str]) -> Settings:
    """Where the stack is, for the targets' environment `env`: only what `ensure_stack` needs."""
    database = {"url": env.get("TENK_DATABASE_URL"), "embedded_port": env.get("TENK_DATABASE_EMBEDDED_PORT")}
    redis = {"url": env.get("TENK_REDIS_URL"), "embedded_port": env.get("TENK_REDIS_EMBEDDED_PORT")}
    ingest = {"durability": env.get("TENK_INGEST_DURABILITY")}
    values: dict[str, object] = {
        "data_dir": env.get("TENK_DATA_DIR"),
        "database": _given(database),
        "redis": _given(redis),
        "ingest": _given(ingest),
    }
    return Settings.model_validate(_given(values))


def _given(values: Mapping[str, object]) -> dict[str, object]:
    return {name: value for name, value in values.items() if value is not None}


LAB_PRODUCTS = 100_000
LAB_TASKS = 10_000


def migrate_and_seed(dsn: str) -> int:
    """The lab's database as `tenk up` leaves it: migrated, seeded if empty, and its seeded products as
    seeded (the dev stack shares the data directory: what a person deleted or changed there is put back).
    Returns how many products had to be restored."""
    from tenk.stack.migrate import migrate
    from tenk.stack.seed import restore_products, seed

    run(migrate(dsn))
    run(seed(dsn, LAB_PRODUCTS, LAB_TASKS))
    return run(restore_products(dsn, LAB_PRODUCTS))


def ensure_stack(env: Mapping[str, str], helper_cpus: str | None) -> StackInfo:
    """Postgres and Redis up, migrated and seeded (idempotent, as `tenk up`); external URLs are used as they are.

    Embedded servers are moved onto the helpers' cores, so they never share the target's CPU.
    """
    settings = stack_settings(env)
    started: list[Stoppable] = []
    pids: dict[str, int] = {}
    servers: list[EmbeddedPostgres | EmbeddedRedis] = []
    if not settings.database.url:
        servers.append(settings.embedded_postgres())
    if not settings.redis.url:
        servers.append(settings.embedded_redis())
    with stopped_on_failure(started):
        for server in servers:
            try:
                if server.start():
                    started.append(server)
            except Exception as exc:
                raise LabError(f"could not start the embedded {server.__class__.__name__}: {exc}") from exc
            pid = server.pid()
            if pid is not None:
                pids["postgres" if isinstance(server, EmbeddedPostgres) else "redis"] = pid
        try:
            restored = migrate_and_seed(settings.resolved_direct_database_url)
        except Exception as exc:
            raise LabError(f"could not migrate/seed {settings.resolved_database_url}: {exc}") from exc
    if helper_cpus:
        for pid in pids.values():
            pin_tree(pid, cpu_set(helper_cpus))
    return StackInfo(
        {
            "TENK_DATABASE_URL": settings.resolved_database_url,
            "TENK_REDIS_URL": settings.resolved_redis_url,
            "TENK_DATA_DIR": str(settings.data_dir),
        },
        started,
        pids,
        restored,
    )


def start_upstream(
    processes: ProcessSet, config: RungConfig, cpus: str | None, env: Mapping[str, str]
) -> tuple[str, str]:
    """The mock vendor for a rung: its URL, and the admin token that resets its counts."""
    port = free_port()
    token = new_admin_token()
    up = config.upstream
    argv = _tenk(
        "mock-upstream", "--host", "127.0.0.1", "--port", str(port),
        "--p50-ms", f"{up['p50_ms']:g}", "--p99-ms", f"{up['p99_ms']:g}",
        "--error-rate", f"{up['error_rate']:g}", "--hang-rate", f"{up['hang_rate']:g}", "--seed", "1",
    )  # fmt: skip
    item = processes.start("mock-upstream", argv, {**env, ADMIN_TOKEN_ENV: token}, cpus)
    url = f"http://127.0.0.1:{port}"
    wait_ready(item, url + "/health")
    return url, token


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


def start_target(
    processes: ProcessSet, config: RungConfig, env: Mapping[str, str], budget: CpuBudget | None = None
) -> tuple[Started, str]:
    port = free_port()
    item = processes.start("target", target_argv(config, port, env), env, config.cpus, budget)
    base = f"http://127.0.0.1:{port}"
    # tenk and the baselines serve /health; an arbitrary app only has to answer at all.
    wait_ready(item, base + "/health", ready_timeout_s(budget), accept_any=not config.is_ours)
    return item, base


def ready_timeout_s(budget: CpuBudget | None) -> float:
    """How long a target may take to answer: starting is CPU work (imports, every worker's), and under a quota
    of B cores it takes 1/B times as long. Two tenk workers under 150m took over 45 s to start."""
    if budget is None or budget.millicores >= 1000:
        return READY_TIMEOUT_S
    return READY_TIMEOUT_S * 1000 / budget.millicores


def start_redis(processes: ProcessSet, io_threads: int, cpus: str | None, env: Mapping[str, str]) -> str:
    """A private, empty redis-server for one rung, started with `--io-threads N`: Redis 6.2 reads
    io-threads only at start (CONFIG SET refuses it), so a rung that turns it on needs its own server.
    Loopback only, no persistence: it lives as long as the rung. Returns its URL."""
    import redis

    from tenk.stack.redis import redis_server_path

    port = free_port()
    argv = [
        redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--io-threads", str(io_threads), "--io-threads-do-reads", "yes" if io_threads > 1 else "no",
    ]  # fmt: skip
    item = processes.start("redis", argv, env, cpus)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if item.process.poll() is not None:
            raise NotReadyError(f"redis exited with code {item.process.returncode}.\n{item.log_tail()}")
        try:
            with redis.Redis.from_url(url, socket_timeout=1.0) as client:
                client.ping()
            return url
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise NotReadyError(f"redis did not answer PING on {url}.\n{item.log_tail()}") from None
            time.sleep(0.1)
