"""A pidfile names a process; tenk signals it only when that process is provably the server it started."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.stack import Stack
from tenk.stack import EmbeddedPostgres, EmbeddedRedis, free_port, start_on_free_port


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process, as a reused PID would name."""
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


def _postmaster_pid_naming(pgdata: Path, pid: int, port: int) -> None:
    pgdata.mkdir(parents=True, exist_ok=True)
    started = int(psutil.Process(pid).create_time())
    (pgdata / "postmaster.pid").write_text(f"{pid}\n{pgdata}\n{started}\n{port}\n")


def test_down_leaves_alone_an_unrelated_process_a_stale_pidfile_names(
    stack_root: Path, bystander: subprocess.Popen[bytes]
) -> None:
    pg = EmbeddedPostgres(stack_root / "postgres", free_port())
    redis = EmbeddedRedis(stack_root / "redis", free_port())
    _postmaster_pid_naming(pg.pgdata, bystander.pid, pg.port)
    redis.data_dir.mkdir(parents=True, exist_ok=True)
    redis.pidfile.write_text(f"{bystander.pid}\n")

    assert not pg.running()
    assert not redis.running()
    assert pg.pid() is None, "the lab pins server.pid() to CPUs: a stranger's PID must not come back"
    assert redis.pid() is None
    pg.stop()
    pg.kill()
    redis.stop()
    redis.kill()
    assert bystander.poll() is None, "a process tenk did not start was signalled"


def test_a_pidfile_naming_another_stacks_server_is_not_ours(stack: Stack, stack_root: Path) -> None:
    """Same executable, different data dir: another run's Redis and Postgres survive our `down`."""
    theirs_redis, theirs_pg = stack.redis.process(), stack.pg.process()
    assert theirs_redis is not None
    assert theirs_pg is not None
    pg = EmbeddedPostgres(stack_root / "postgres", stack.pg.port)
    redis = EmbeddedRedis(stack_root / "redis", stack.redis.port)
    _postmaster_pid_naming(pg.pgdata, theirs_pg.pid, stack.pg.port)
    redis.data_dir.mkdir(parents=True, exist_ok=True)
    redis.pidfile.write_text(f"{theirs_redis.pid}\n{theirs_redis.create_time()!r}\n")

    assert not pg.running()
    assert not redis.running()
    pg.stop()
    redis.stop()
    assert stack.redis.running()
    assert stack.pg.running()


def test_a_recorded_start_time_that_does_not_match_means_the_pid_was_reused(stack_root: Path) -> None:
    redis = start_on_free_port(lambda port: EmbeddedRedis(stack_root / "redis", port))
    proc = redis.process()
    assert proc is not None
    try:
        # The same PID, recorded as having started an hour earlier: a different process by definition.
        redis.pidfile.write_text(f"{proc.pid}\n{proc.create_time() - 3600!r}\n")
        assert not redis.running()
        redis.stop()
        assert proc.is_running()
    finally:
        proc.kill()
