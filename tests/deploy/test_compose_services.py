"""compose.yaml's own start-up scripts, run for real without a container engine: the Postgres init script on
the suite's Postgres, Valkey's wrapper on the embedded Redis server (same start-up code, older version), and
the refusals of Postgres, Valkey and Grafana to start without their secrets. Only the image's entrypoint is a
stand-in, a script that execs what it is given."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis
import yaml

from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.stack import free_port
from tenk.stack._ports import wait_listening
from tenk.stack.migrate import migrate
from tenk.stack.postgres import _bin_dir
from tenk.stack.redis import redis_server_path
from tests.deploy.test_compose import COMPOSE, service_script

ROOT = Path(__file__).resolve().parents[2]
INIT_SQL = ROOT / "deploy" / "postgres" / "initdb" / "10-app-role.sql"
SERVICES: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]


def _entrypoint_stand_in(directory: Path, body: str) -> dict[str, str]:
    """A PATH whose `docker-entrypoint.sh` runs `body` (the image's would drop privileges, then exec)."""
    directory.mkdir(parents=True, exist_ok=True)
    stand_in = directory / "docker-entrypoint.sh"
    stand_in.write_text(f"#!/bin/sh\n{body}\n")
    stand_in.chmod(0o755)
    return {"PATH": f"{directory}:{os.environ['PATH']}"}


def _run_script(service: str, env: dict[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
    script = service_script(SERVICES[service])
    return subprocess.Popen(["/bin/sh", "-ec", script], env=env, **kwargs)


def _refusal(service: str, env: dict[str, str]) -> str:
    done = _run_script(service, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = done.communicate(timeout=deadline_s())
    assert done.returncode != 0, out
    assert b"started" not in out
    return err.decode()


@pytest.mark.parametrize(
    ("service", "env", "named"),
    [
        ("postgres", {"APP_DB_PASSWORD": "x" * 32}, "POSTGRES_PASSWORD"),
        ("postgres", {"POSTGRES_PASSWORD": "x" * 32, "APP_DB_PASSWORD": "short"}, "APP_DB_PASSWORD"),
        ("valkey", {}, "VALKEY_PASSWORD"),
        ("valkey", {"VALKEY_PASSWORD": "has spaces and 'quotes' in it, long enough"}, "VALKEY_PASSWORD"),
        ("valkey", {"VALKEY_PASSWORD": "short-but-clean"}, "VALKEY_PASSWORD"),
        ("grafana", {"GF_SECURITY_ADMIN_PASSWORD": ""}, "GF_SECURITY_ADMIN_PASSWORD"),
    ],
)
def test_a_service_without_its_secret_refuses_to_start_and_names_it(
    service: str, env: dict[str, str], named: str, tmp_path: Path
) -> None:
    path = _entrypoint_stand_in(tmp_path, "echo started")
    assert named in _refusal(service, {**path, **env})


def test_the_services_start_with_their_secrets(tmp_path: Path) -> None:
    path = _entrypoint_stand_in(tmp_path, "echo started")
    given = {"POSTGRES_PASSWORD": "p" * 24, "APP_DB_PASSWORD": "a" * 24, "VALKEY_PASSWORD": "v" * 24}
    for service in ("postgres", "valkey"):
        started = _run_script(service, {**path, **given}, stdout=subprocess.PIPE)
        assert started.communicate(timeout=deadline_s())[0] == b"started\n", service
    # Grafana's entrypoint is /run.sh: the stand-in takes its place.
    script = service_script(SERVICES["grafana"]).replace("exec /run.sh", "exec docker-entrypoint.sh")
    done = subprocess.run(
        ["/bin/sh", "-ec", script], env={**path, "GF_SECURITY_ADMIN_PASSWORD": "g" * 12}, capture_output=True
    )
    assert done.stdout == b"started\n"


@pytest.fixture
def valkey(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, str]]:
    """compose's Valkey script, its server the embedded Redis binary (the entrypoint stand-in swaps the name)."""
    port = free_port()
    password = secrets.token_urlsafe(32)
    data = tmp_path / "data"
    data.mkdir()
    path = _entrypoint_stand_in(
        tmp_path / "bin", f'shift\nexec {redis_server_path()} --port {port} --dir {data} --save "" "$@"'
    )
    server = _run_script("valkey", {**path, "VALKEY_PASSWORD": password}, stdout=subprocess.DEVNULL)
    try:
        wait_listening(server, port, deadline_s(), "valkey")
        yield server, port, password
    finally:
        server.terminate()
        server.wait(deadline_s())


def test_valkey_answers_only_with_its_password_which_no_command_line_shows(
    valkey: tuple[subprocess.Popen[bytes], int, str],
) -> None:
    server, port, password = valkey
    with redis.Redis(port=port) as anonymous, pytest.raises(redis.AuthenticationError):
        anonymous.ping()
    with redis.Redis(port=port, password=password) as client:
        assert client.ping()
        assert client.config_get("maxmemory") == {"maxmemory": str(2**30)}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert client.config_get("appendonly") == {"appendonly": "yes"}
    # The script execs all the way down: the server is the process started, and its argv holds no password.
    assert password.encode() not in Path(f"/proc/{server.pid}/cmdline").read_bytes()


def _run_init_sql(stack: Stack, database: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The init script as the postgres image's entrypoint runs it: psql, as the superuser, ON_ERROR_STOP."""
    pg = stack.pg
    argv = [str(_bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", pg.superuser, "--no-psqlrc"]
    argv += ["--no-password", "-v", "ON_ERROR_STOP=1", "--dbname", database, "-f", str(INIT_SQL)]
    full_env = {**os.environ, "PGPASSWORD": pg.superuser_password, **env}
    return subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=deadline_s())


@pytest.fixture
def init_database(stack: Stack) -> Iterator[tuple[str, str]]:
    """A new database and a role name, both dropped afterwards, for the init script to work on."""
    suffix = uuid.uuid4().hex[:8]
    database, role = f"tenk_initdb_{suffix}", f"tenk_app_{suffix}"

    async def admin(*statements: str) -> None:
        connection = await asyncpg.connect(stack.pg.superuser_url)
        try:
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(admin(f'CREATE DATABASE "{database}"'))
    try:
        yield database, role
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)', f'DROP ROLE IF EXISTS "{role}"'))


def test_the_init_script_makes_an_app_role_that_owns_the_database_and_is_no_superuser(
    stack: Stack, init_database: tuple[str, str]
) -> None:
    database, role = init_database
    password = secrets.token_urlsafe(32)
    done = _run_init_sql(stack, database, {"APP_DB_USER": role, "APP_DB_PASSWORD": password})
    assert done.returncode == 0, done.stderr
    assert password not in done.stdout + done.stderr
    dsn = f"postgresql://{role}:{password}@127.0.0.1:{stack.pg.port}/{database}"

    async def as_the_app_role() -> asyncpg.Record:
        await migrate(dsn)  # every migration runs as the app role
        connection = await asyncpg.connect(dsn)
        try:
            return await connection.fetchrow(
                """SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolreplication, r.rolbypassrls,
                          pg_get_userbyid(d.datdba) = current_user AS owns_database,
                          (SELECT count(*) FROM pg_tables WHERE schemaname = 'public') AS tables,
                          has_database_privilege('public', current_database(), 'CONNECT') AS public_connects
                   FROM pg_roles r, pg_database d
                   WHERE r.rolname = current_user AND d.datname = current_database()"""
            )
        finally:
            await connection.close()

    row = asyncio.run(as_the_app_role())
    assert not any(row[flag] for flag in ("rolsuper", "rolcreaterole", "rolcreatedb", "rolreplication", "rolbypassrls"))
    assert row["owns_database"]
    assert row["tables"] > 0
    assert not row["public_connects"]


def test_the_init_script_refuses_a_missing_password_and_creates_no_role(
    stack: Stack, init_database: tuple[str, str]
) -> None:
    database, role = init_database
    for env in ({"APP_DB_USER": role}, {"APP_DB_USER": role, "APP_DB_PASSWORD": "too-short"}):
        done = _run_init_sql(stack, database, env)
        assert done.returncode != 0
        assert "APP_DB_PASSWORD" in done.stderr

    async def role_exists() -> bool:
        connection = await asyncpg.connect(stack.pg.superuser_url)
        try:
            return bool(await connection.fetchval("SELECT count(*) FROM pg_roles WHERE rolname = $1", role))
        finally:
            await connection.close()

    assert not asyncio.run(role_exists())
