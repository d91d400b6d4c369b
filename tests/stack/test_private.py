"""The embedded servers are for the user who started them: passwords, private files, no wider permissions."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path

import asyncpg
import pytest
import redis
from redis.asyncio import Redis

from harness.stack import Stack
from tenk.stack import EmbeddedPostgres, EmbeddedRedis, free_port, start_on_free_port, wait_listening
from tenk.stack._private import (
    SERVER_USER,
    UnreachableError,
    UnsafeDataDirError,
    make_private,
    running_as_root,
    secret,
)
from tenk.stack.devkey import ensure_dev_key
from tenk.stack.redis import redis_server_path
from tests.stack.test_embedded import _tenk


def _modes(paths: list[Path]) -> dict[Path, int]:
    return {path: stat.S_IMODE(path.stat().st_mode) for path in paths}


def test_starting_postgres_changes_no_permission_above_the_data_dir(stack_root: Path) -> None:
    # A checkout in a home directory: the home is 0700 and must stay so.
    home = stack_root / "home"
    home.mkdir(mode=0o700)
    data_dir = home / "checkout" / ".tenk"
    data_dir.parent.mkdir(mode=0o755)
    above = [home, data_dir.parent, stack_root.parent]
    before = _modes(above)
    pg = EmbeddedPostgres(data_dir / "postgres", free_port())
    try:
        if running_as_root():
            # Postgres runs as tenk-pg, which cannot enter the home: tenk says so instead of opening it.
            with pytest.raises(UnreachableError, match="cannot reach"):
                pg.start()
        else:
            pg.start()
    finally:
        pg.stop()
    assert _modes(above) == before


def test_the_data_dir_and_every_secret_are_private(stack: Stack) -> None:
    other_bits = stat.S_IRWXO
    for directory in (stack.root, stack.pg.data_dir, stack.redis.data_dir, stack.pg.socket_dir):
        assert directory.stat().st_mode & other_bits == 0, directory
    assert stat.S_IMODE(stack.pg.socket_dir.stat().st_mode) == 0o700
    secrets = [stack.pg.data_dir / "password", stack.pg.data_dir / "app-password", stack.redis.data_dir / "password"]
    for path in secrets:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # The server reads its config as tenk-pg when we are root: to that group, still to nobody else.
    assert stat.S_IMODE(stack.redis.config_path.stat().st_mode) == (0o640 if running_as_root() else 0o600)
    for path in [*stack.redis.data_dir.iterdir(), *stack.redis.work_dir.iterdir(), stack.pg.log_path]:
        if path.is_file() and path != stack.redis.config_path:
            assert path.stat().st_mode & (stat.S_IRWXO | stat.S_IRWXG) == 0, path
    # The password never appears on a command line, which every local user can read.
    proc = stack.redis.process()
    assert proc is not None
    assert stack.redis.password not in " ".join(proc.cmdline())


async def test_postgres_refuses_a_client_without_the_password(stack: Stack) -> None:
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(user="postgres", host="127.0.0.1", port=stack.pg.port, database="tenk", password="")
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(host=str(stack.pg.socket_dir), port=stack.pg.port, user="postgres", database="tenk")


async def test_redis_refuses_a_client_without_the_password(stack: Stack) -> None:
    client = Redis(port=stack.redis.port)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            await client.ping()
    finally:
        await client.aclose()


async def test_a_cluster_from_before_passwords_requires_them_from_its_next_start(stack_root: Path) -> None:
    pg = EmbeddedPostgres(stack_root / "postgres", free_port())
    pg.init()
    hba = pg.pgdata / "pg_hba.conf"
    hba.write_text(hba.read_text().replace(" scram-sha-256", " trust"))
    try:
        pg.start()
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(user="postgres", host="127.0.0.1", port=pg.port, database="tenk", password="")
        conn = await asyncpg.connect(pg.url)
        await conn.close()
    finally:
        pg.stop()


def test_a_redis_from_before_passwords_gets_one_from_the_next_up(stack_root: Path) -> None:
    server = EmbeddedRedis(stack_root / "redis", free_port())
    server.data_dir.mkdir(parents=True)
    # What an older tenk started: no password, its settings on the command line, its own pidfile.
    legacy = subprocess.Popen(
        [redis_server_path(), "--port", str(server.port), "--bind", "127.0.0.1", "--dir", str(server.data_dir)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_listening(legacy, server.port, 30, "redis")
        server.pidfile.write_text(f"{legacy.pid}\n")
        # Restarted, not reused: it has no socket, and Redis takes `unixsocket` at start only.
        assert server.start() is True
        assert legacy.wait(30) is not None
        with pytest.raises(redis.exceptions.AuthenticationError), redis.Redis(port=server.port) as stranger:
            stranger.ping()
        with redis.Redis.from_url(server.url) as owner:
            assert owner.ping()
    finally:
        server.stop()
        legacy.kill()
        legacy.wait()


def test_the_servers_never_run_as_root(stack: Stack) -> None:
    for server in (stack.pg, stack.redis):
        proc = server.process()
        assert proc is not None
        assert proc.uids().effective != 0, f"{server.__class__.__name__} runs as root"
        if running_as_root():
            assert proc.username() == SERVER_USER


def _another_user() -> pwd.struct_passwd:
    return pwd.getpwnam("nobody")


def _up_refused(data_dir: Path) -> str:
    """`tenk up` on `data_dir`, which must refuse it: its error. The directory is reachable by every user (as
    root, the servers' user must reach it), so a refusal is about the directory, not about reaching it."""
    data_dir.parent.chmod(0o755)
    ports = (free_port(), free_port())
    try:
        refused = _tenk(data_dir, *ports, "up", "--no-seed")
    finally:
        _tenk(data_dir, *ports, "down")
    assert refused.returncode != 0, "tenk up used it"
    assert not (data_dir / "postgres").exists(), "nothing may be started from it"
    return refused.stderr


@pytest.mark.skipif(not running_as_root(), reason="only root can give a directory to another user")
def test_up_refuses_a_data_dir_another_user_owns_and_says_why(stack_root: Path) -> None:
    data_dir = stack_root / "theirs"
    data_dir.mkdir(mode=0o755)
    # What its owner left there: a password and a dev key tenk would otherwise use as they are.
    (data_dir / "dev-api-key").write_text("tk_chosen_by_them\n")
    for path in (data_dir, data_dir / "dev-api-key"):
        os.chown(path, _another_user().pw_uid, _another_user().pw_gid)
    assert f"{data_dir} belongs to nobody" in _up_refused(data_dir)


def test_up_refuses_a_data_dir_others_may_write_and_says_why(stack_root: Path) -> None:
    data_dir = stack_root / "shared"
    data_dir.mkdir()
    data_dir.chmod(0o777)
    assert f"{data_dir} is writable by other users (mode 0777)" in _up_refused(data_dir)


@pytest.mark.skipif(not running_as_root(), reason="only root can give a file to another user")
def test_a_password_or_dev_key_another_user_owns_is_refused(stack_root: Path) -> None:
    for name in ("password", "dev-api-key"):
        (stack_root / name).write_text("chosen by them\n")
        os.chown(stack_root / name, _another_user().pw_uid, _another_user().pw_gid)
    with pytest.raises(UnsafeDataDirError, match="password belongs to nobody"):
        secret(stack_root / "password")
    with pytest.raises(UnsafeDataDirError, match="dev-api-key belongs to nobody"):
        ensure_dev_key(stack_root)


def test_a_secret_that_is_a_link_is_refused(stack_root: Path) -> None:
    elsewhere = stack_root / "elsewhere"
    elsewhere.write_text("not a password\n")
    (stack_root / "password").symlink_to(elsewhere)
    with pytest.raises(UnsafeDataDirError, match="is a symbolic link"):
        secret(stack_root / "password")


def test_a_redis_dir_of_the_old_layout_is_moved_into_data_with_its_contents(stack_root: Path) -> None:
    server = start_on_free_port(lambda port: EmbeddedRedis(stack_root / "redis", port))
    try:
        with redis.Redis.from_url(server.url) as client:
            client.set("kept", "across the move")
    finally:
        server.stop()
    # The layout before data/: the AOF beside tenk's files and, as root, the directory the server user's.
    for entry in server.work_dir.iterdir():
        entry.rename(server.data_dir / entry.name)
    server.work_dir.rmdir()
    if running_as_root():
        for path in [server.data_dir, *server.data_dir.rglob("*")]:
            os.chown(path, pwd.getpwnam(SERVER_USER).pw_uid, pwd.getpwnam(SERVER_USER).pw_gid, follow_symlinks=False)
    try:
        server.start()
        with redis.Redis.from_url(server.url) as client:
            assert client.get("kept") == b"across the move"
        assert server.data_dir.stat().st_uid == os.geteuid()
        assert (server.work_dir / "appendonlydir").is_dir()
    finally:
        server.stop()


def test_a_data_dir_group_writable_to_a_private_group_is_used_and_to_a_shared_one_refused(stack_root: Path) -> None:
    # umask 002 (Fedora, Debian's user private groups) makes checkouts group-writable to a group of one.
    own = stack_root / "own-group"
    own.mkdir()
    os.chown(own, -1, os.getegid())
    own.chmod(0o770)
    if any(user.pw_gid == os.getegid() and user.pw_uid != os.geteuid() for user in pwd.getpwall()):
        pytest.skip("this user's primary group is shared")
    make_private(own)
    if running_as_root():
        shared = stack_root / "shared-group"
        shared.mkdir()
        os.chown(shared, -1, pwd.getpwnam(SERVER_USER).pw_gid)  # tenk-pg's group: tenk-pg may write
        shared.chmod(0o770)
        with pytest.raises(UnsafeDataDirError, match="is writable by other users"):
            make_private(shared)
