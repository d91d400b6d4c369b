"""Starting and stopping what a rung measures: the target (pinned to its CPU set), the mock upstream
and ingest workers (on the other cores), and the embedded stack.

Everything started goes into a `ProcessSet`, whose exit stops it all, on errors and Ctrl-C too.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import asyncpg
import psutil

from tenk.interrupts import run, sigterm_as_ctrl_c
from tenk.lab.cpus import cpu_set, pin_tree, pinned
from tenk.lab.definition.ladder import RungConfig
from tenk.lab.errors import LabError, NotReadyError
from tenk.lab.processes.cpubudget import CpuBudget
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
    start_on_free_port,
    wait_http_ok,
)
from tenk.stack._private import make_private
from tenk.stack._reachable import servers_home
from tenk.stack._redact import redacted_url as redacted
from tenk.stack.seeded_copy import SeededCopy

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
    if config.command:
        fill = {"{port}": str(port), "{workers}": str(config.workers)}
        return [_filled(part, fill) for part in config.command]
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


def _filled(text: str, values: Mapping[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


class Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass
class StackInfo:
    env: dict[str, str]
    started: list[Stoppable]  # what the lab started, and so stops: servers, or a cluster's stores
    pids: dict[str, int]  # "postgres" (the postmaster) and "redis", when embedded
    data: str = ""  # what the rungs' database is, and where it came from, for the report


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


# The lab's own data, beside the dev stack's: a database in the embedded Postgres (`tenk` is the dev
# stack's) and a Redis of its own, in `lab-redis/` beside the dev stack's `redis/`.
LAB_DATABASE = "tenk_lab"
LAB_REDIS = "lab-redis"
LAB_PRODUCTS = 100_000
LAB_TASKS = 10_000
# Held by a run for as long as it uses the lab's data: a second run would drop the first one's database.
LAB_LOCK = "lab.lock"


def seed_counts(env: Mapping[str, str]) -> tuple[int, int]:
    """How many products and tasks the lab's database is seeded with: TENK_LAB_PRODUCTS and TENK_LAB_TASKS."""
    counts = []
    for variable, default in (("TENK_LAB_PRODUCTS", LAB_PRODUCTS), ("TENK_LAB_TASKS", LAB_TASKS)):
        text = env.get(variable, "").strip()
        if not text:
            counts.append(default)
            continue
        try:
            count = int(text)
        except ValueError:
            count = -1
        if count < 1:
            raise LabError(f"{variable}={text!r}: a whole number of rows, at least 1, is needed")
        counts.append(count)
    return counts[0], counts[1]


def lab_database(server: EmbeddedPostgres, products: int, tasks: int) -> tuple[str, str]:
    """The lab's database on the embedded `server`, afresh from its seeded template (`tenk.stack.seeded_copy`),
    with the day partitions of `events` that a worker keeps for today. Returns its URL and what it is."""
    from tenk.ingest.partitions import maintain
    from tenk.stack.migrate import migrate
    from tenk.stack.seed import fingerprint, seed

    def fill(url: str) -> None:
        run(migrate(url))
        run(seed(url, products, tasks))

    copy = SeededCopy(server, LAB_DATABASE, fingerprint(products, tasks), fill)
    made = copy.renew()

    async def partitions() -> None:
        conn = await asyncpg.connect(copy.url)
        try:
            await maintain(conn, retention_days=0)
        finally:
            await conn.close()

    run(partitions())
    seeded = f"{products:,} products and {tasks:,} tasks"
    how = "seeded into its template first" if made else "copied from its seeded template"
    return copy.url, f"the lab's own database ({LAB_DATABASE}, {seeded}), {how} at the ladder's start"


def given_database(url: str, direct_url: str, whose: str = "TENK_DATABASE_URL's") -> str:
    """A database the lab was pointed at is used as it is: migrated, and seeded if empty. Returns what it is."""
    from tenk.stack.migrate import migrate
    from tenk.stack.seed import seed

    run(migrate(direct_url))
    run(seed(direct_url, LAB_PRODUCTS, LAB_TASKS))
    return f"{whose} database ({redacted(url)}), as it was: migrated, and seeded if it was empty"


@dataclass
class DataLock:
    """`lab.lock` in the data directory, held (flock) while a run uses the lab's data; released on `stop`,
    and by the kernel if the run dies."""

    fd: int

    @classmethod
    def take(cls, data_dir: Path) -> DataLock:
        # As `tenk up` makes it (where the servers live follows from it: tenk.stack._reachable.servers_home).
        make_private(data_dir, server_may_enter=True)
        path = data_dir / LAB_LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LabError(
                f"another `tenk lab run` is using the lab's data in {data_dir}: wait for it to finish, "
                "or give this one another TENK_DATA_DIR"
            ) from None
        return cls(fd)

    def stop(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def lab_redis(settings: Settings) -> EmbeddedRedis:
    """The lab's Redis, beside the dev stack's rather than a database inside it: a Redis database of its own
    would still share the dev server's Pub/Sub channels, memory limit and fsync policy. Started for each run
    on a free port, and flushed before each rung repeat (the lab owns it)."""
    home = servers_home(settings.data_dir) / LAB_REDIS
    # One left running by a run that was killed: nobody else uses it (a run holds the lab's lock).
    EmbeddedRedis(home, 0).stop()
    return start_on_free_port(lambda port: EmbeddedRedis(home, port, settings.ingest.durability))


def ensure_stack(env: Mapping[str, str], helper_cpus: str | None) -> StackInfo:
    """The stack the rungs use, up: the lab's own data, unless the environment names a Postgres or a Redis.

    Embedded, the lab's data is a database of its own in the embedded Postgres, fresh from its seeded
    template (`lab_database`), and a Redis of its own (`lab_redis`): the dev stack's database and Redis
    (`tenk`, and the Redis `make run` uses) are neither read nor written. A Postgres or Redis named by
    TENK_DATABASE_URL or TENK_REDIS_URL is used as it is. The embedded servers are moved onto the
    helpers' cores, so they never share the target's CPU.
    """
    settings = stack_settings(env)
    started: list[Stoppable] = []
    pids: dict[str, int] = {}
    with stopped_on_failure(started):
        if not (settings.database.url and settings.redis.url):
            started.append(DataLock.take(settings.data_dir))
        postgres = None if settings.database.url else settings.embedded_postgres()
        if postgres is not None:
            try:
                if postgres.start():
                    started.append(postgres)
            except Exception as exc:
                raise LabError(f"could not start the embedded Postgres: {exc}") from exc
            if (pid := postgres.pid()) is not None:
                pids["postgres"] = pid
        redis_url = settings.redis.url
        if not redis_url:
            try:
                own_redis = lab_redis(settings)
            except Exception as exc:
                raise LabError(f"could not start the lab's Redis: {exc}") from exc
            started.append(own_redis)
            redis_url = own_redis.url
            if (pid := own_redis.pid()) is not None:
                pids["redis"] = pid
        try:
            if postgres is not None:
                database_url, data = lab_database(postgres, *seed_counts(env))
            else:
                database_url = settings.resolved_database_url
                data = given_database(database_url, settings.resolved_direct_database_url)
        except LabError:
            raise
        except Exception as exc:
            raise LabError(f"could not migrate/seed {redacted(settings.resolved_database_url)}: {exc}") from exc
    if helper_cpus:
        for pid in pids.values():
            pin_tree(pid, cpu_set(helper_cpus))
    env_out = {"TENK_DATABASE_URL": database_url, "TENK_REDIS_URL": redis_url, "TENK_DATA_DIR": str(settings.data_dir)}
    return StackInfo(env_out, started, pids, data)


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
    of B cores it takes 1/B times as long. Two tenk workers under a small quota outlasted the unbudgeted
    READY_TIMEOUT_S starting."""
    if budget is None or budget.millicores >= 1000:
        return READY_TIMEOUT_S
    return READY_TIMEOUT_S * 1000 / budget.millicores


def start_redis(processes: ProcessSet, io_threads: int, cpus: str | None, env: Mapping[str, str]) -> str:
    """A private, empty redis-server for one rung, started with `--io-threads N`: Redis 6.2 reads
    io-threads only at start (CONFIG SET refuses it), so a rung that turns it on needs its own server.
    No persistence: it lives as long as the rung. On a Unix socket in a 0700 directory of the rung's and
    no port, as tenk reaches the stack's own Redis: the rungs compare servers, not transports, and nobody
    else can reach what a rung writes. Returns its URL."""
    import redis

    from tenk.stack._private import make_private
    from tenk.stack._sockets import addressable, redis_url
    from tenk.stack.redis import SOCKET_NAME, redis_server_path

    directory = processes.log_dir.resolve() / "redis-socket"
    make_private(directory)
    socket = addressable(directory, SOCKET_NAME) / SOCKET_NAME
    argv = [
        redis_server_path(), "--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700",
        "--save", "", "--appendonly", "no",
        "--io-threads", str(io_threads), "--io-threads-do-reads", "yes" if io_threads > 1 else "no",
    ]  # fmt: skip
    item = processes.start("redis", argv, env, cpus)
    url = redis_url(socket)
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
