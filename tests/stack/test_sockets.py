"""tenk's own clients reach the embedded servers through their private sockets: a freed port hears nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest
import redis

from harness.clients import TEST_API_KEY, TEST_CURSOR_SECRET
from harness.deadlines import deadline_s
from harness.stack import VENV_BIN
from tenk.lab.measuring.state import db_now, flush_redis
from tenk.lab.processes.servers import given_database, stack_settings
from tenk.ops.api_keys import digest
from tenk.settings import Settings
from tenk.stack import EmbeddedRedis, Spawned, free_port, spawn_logged, start_http_server
from tenk.stack._private import UnsafeDataDirError, running_as_root
from tenk.stack._sockets import SOCKET_PATH_MAX, alias_home
from tests.stack.listeners import Heard, listening_on
from tests.support.waiting import eventually_blocking

AUTH = {"Authorization": f"Bearer {TEST_API_KEY}"}
# Measured here: the worker writes an accepted event within a second or two; the deadline is for a busy machine.
EVENT_WRITTEN_S = 60.0
# The worker retries a lost Redis at most a second apart (`tenk.ingest.worker._backoff`): two retries, with
# room for a busy machine.
RETRIES_SEEN_S = 30.0
NOBODY = 65534


def _env(data_dir: Path, pg_port: int, redis_port: int) -> dict[str, str]:
    """What `tenk up`, `tenk serve` and `tenk worker` get: where the data dir is, and nothing about URLs."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TENK_DATA_DIR": str(data_dir),
        "TENK_DATABASE_EMBEDDED_PORT": str(pg_port),
        "TENK_REDIS_EMBEDDED_PORT": str(redis_port),
        "TENK_API_KEYS": digest(TEST_API_KEY),
        "TENK_CURSOR_SECRET": TEST_CURSOR_SECRET,
        "TENK_UPSTREAM_URL": f"http://127.0.0.1:{free_port()}",
        "TENK_INGEST_FLUSH_MS": "20",
        "TENK_LOG_LEVEL": "INFO",
    }


def _tenk(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "tenk"), *args], env=env, capture_output=True, text=True, timeout=180)


@contextmanager
def _api_and_worker(env: dict[str, str], logs: Path) -> Iterator[tuple[str, Spawned]]:
    api, base = start_http_server(
        "tenk serve",
        lambda port: [str(VENV_BIN / "tenk"), "serve", "--server", "uvicorn", "--port", str(port)],
        lambda port: logs / f"api-{port}.log",
        timeout=deadline_s(),
        env=env,
    )
    worker_argv = [str(VENV_BIN / "tenk"), "worker", "--name", "sockets-1"]
    worker = spawn_logged("worker", worker_argv, logs / "worker.log", env=env)
    try:
        yield base, worker
    finally:
        api.stop(20)
        worker.stop(20)


def _event() -> dict[str, object]:
    return {"source": "sockets", "ts": "2026-01-02T03:04:05Z", "payload": {"n": 1}, "event_id": str(uuid.uuid4())}


def _retries(worker: Spawned) -> int:
    """How often the worker has said it lost Redis and will try again."""
    return worker.log.read_text(errors="replace").count("retrying")


def _lab_connects(env: dict[str, str]) -> dict[str, object]:
    """The lab's own connections, to where it resolves the stack from a target's environment: its seed
    (asyncpg), its clock and counts (psycopg) and its flush between runs (redis-py). What each ended with."""
    settings = stack_settings(env)
    outcomes: dict[str, object] = {"db_now": db_now(settings.resolved_database_url)}
    for name, call in (
        (
            "migrate_and_seed",
            lambda: given_database(settings.resolved_database_url, settings.resolved_direct_database_url),
        ),
        ("flush_redis", lambda: flush_redis(settings.resolved_redis_url)),
    ):
        try:
            outcomes[name] = call()
        except Exception as exc:  # what each failed with is the outcome: the servers are gone
            outcomes[name] = exc
    return outcomes


def _heard(postgres: Heard, redis_heard: Heard) -> str:
    return f"postgres's port heard {postgres.snapshot()}, redis's heard {redis_heard.snapshot()}"


def test_a_listener_on_the_freed_ports_hears_nothing_from_the_api_the_worker_or_the_lab(
    stack_root: Path, tmp_path: Path
) -> None:
    pg_port, redis_port = free_port(), free_port()
    env = _env(stack_root, pg_port, redis_port)
    up = _tenk(env, "up", "--products", "50", "--tasks", "5")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        with (
            _api_and_worker(env, tmp_path) as (base, worker),
            httpx.Client(base_url=base, headers=AUTH, timeout=10) as client,
        ):
            # Connected through what the settings resolve: an event is accepted, and the worker writes it.
            event = _event()
            assert client.post("/events", json=event).status_code == 202
            eventually_blocking(
                lambda: client.get(f"/events/{event['event_id']}").status_code == 200,
                EVENT_WRITTEN_S,
                lambda: f"the worker to write the event:\n{worker.log_tail()}",
            )
            down = _tenk(env, "down")
            assert down.returncode == 0, down.stderr
            # Another local user takes both ports; the API, the worker and the lab keep trying to reconnect.
            with listening_on(pg_port, "postgres") as postgres, listening_on(redis_port, "redis") as redis_heard:
                before = _retries(worker)
                ready = client.get("/ready")
                accepted = client.post("/events", json=_event())
                written = client.patch("/products/7", json={"stock": 1})
                lab = _lab_connects(env)
                eventually_blocking(
                    lambda: postgres.snapshot() or redis_heard.snapshot() or _retries(worker) >= before + 2,
                    RETRIES_SEEN_S,
                    lambda: f"the worker to retry Redis twice:\n{worker.log_tail()}",
                )
                assert postgres.snapshot() == [], _heard(postgres, redis_heard)
                assert redis_heard.snapshot() == [], _heard(postgres, redis_heard)
            # They tried, and found the servers gone rather than a stranger.
            assert (ready.status_code, accepted.status_code, written.status_code) == (503, 503, 503), (
                ready.text,
                accepted.text,
                written.text,
            )
            assert lab["db_now"] is None
            assert isinstance(lab["migrate_and_seed"], OSError), lab
            assert isinstance(lab["flush_redis"], redis.ConnectionError), lab
    finally:
        _tenk(env, "down")


async def _select_one(url: str) -> object:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval("SELECT 1")
    finally:
        await conn.close()


def test_a_data_dir_too_deep_for_a_socket_address_is_served_through_a_short_alias(stack_root: Path) -> None:
    # A fresh clone in a long path: the sockets under it would be past what a socket address holds.
    data_dir = stack_root / ("checkout-" * 6) / ("nested-" * 6) / ".tenk"
    data_dir.parent.mkdir(parents=True)
    # Traversable, as a checkout under /srv would be: as root, the servers then run from it, not /var/lib/tenk.
    for directory in (data_dir.parent, *data_dir.parent.parents):
        if directory == stack_root.parent:
            break
        directory.chmod(0o755)
    pg_port, redis_port = free_port(), free_port()
    env = _env(data_dir, pg_port, redis_port)
    settings = Settings(data_dir=data_dir, database={"embedded_port": pg_port}, redis={"embedded_port": redis_port})
    pg, server = settings.embedded_postgres(), settings.embedded_redis()
    assert len(os.fsencode(pg.socket_dir / f".s.PGSQL.{pg_port}")) > SOCKET_PATH_MAX
    assert len(os.fsencode(server.work_dir / "redis.sock")) > SOCKET_PATH_MAX
    try:
        up = _tenk(env, "up", "--products", "20", "--tasks", "2")
        assert up.returncode == 0, up.stdout + up.stderr
        assert asyncio.run(_select_one(settings.resolved_database_url)) == 1
        with redis.Redis.from_url(settings.resolved_redis_url) as client:
            assert client.ping()
        # The alias leads to the data dir's own socket directories, which stay private.
        assert pg.socket_host.resolve() == pg.socket_dir.resolve()
        assert server.socket_path.parent.resolve() == server.work_dir.resolve()
    finally:
        _tenk(env, "down")


def test_a_redis_started_before_it_had_its_socket_is_restarted_with_it(stack_root: Path) -> None:
    class OlderTenk(EmbeddedRedis):
        """The server as an older tenk started it: its port only, where its own client found it."""

        def config(self) -> dict[str, str]:
            return {k: v for k, v in super().config().items() if not k.startswith("unixsocket")}

        def _client(self, password: str | None) -> redis.Redis:
            return redis.Redis(port=self.port, password=password, socket_timeout=5, decode_responses=True)

    port = free_port()
    older = OlderTenk(stack_root / "redis", port)
    older.start()
    try:
        assert not older.socket_path.exists()
        server = EmbeddedRedis(stack_root / "redis", port)
        assert server.start() is True, "restarted, since Redis takes its socket at start only"
        with redis.Redis.from_url(server.url) as client:
            assert client.ping()
        assert server.start() is False, "once it has its socket, a start leaves it running"
    finally:
        older.stop()


def test_an_alias_home_someone_else_made_is_refused(stack_root: Path) -> None:
    # Another user got to /tmp/tenk-<uid> first: a link to a directory of theirs, where they could swap ours.
    theirs = stack_root / "theirs"
    theirs.mkdir()
    (stack_root / f"tenk-{os.geteuid()}").symlink_to(theirs)
    with pytest.raises(UnsafeDataDirError, match="not a directory"):
        alias_home(stack_root)


@pytest.mark.skipif(not running_as_root(), reason="only root can give a directory to another user")
def test_an_alias_home_of_another_user_is_refused(stack_root: Path) -> None:
    home = stack_root / f"tenk-{os.geteuid()}"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    with pytest.raises(UnsafeDataDirError, match="belongs to"):
        alias_home(stack_root)
