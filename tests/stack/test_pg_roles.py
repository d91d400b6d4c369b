"""The API, workers and lab sign in to the embedded Postgres as an application role that owns the app's
data and nothing more: a bug or an injection in the app cannot take the server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from harness.stack import Stack
from tenk.ingest.partitions import maintain
from tenk.settings import Settings
from tenk.stack import EmbeddedPostgres, free_port
from tenk.stack.migrate import migrate
from tenk.stack.pg_replica import LocalPgReplica

# Things only a superuser may do, each a way from an SQL injection to the server user's shell or files.
SUPERUSER_ONLY = [
    "COPY (SELECT 1) TO PROGRAM 'true'",
    "ALTER SYSTEM SET work_mem = '1MB'",
    "SELECT pg_read_file('postgresql.conf')",
    "CREATE ROLE tenk_intruder SUPERUSER",
]

_NOT_OWNED_BY_THE_APP = """
SELECT kind || ' ' || name FROM (
    SELECT 'relation' AS kind, c.oid::regclass::text AS name, c.relowner AS owner
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'function', p.oid::regprocedure::text, p.proowner
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'schema', nspname, nspowner FROM pg_namespace WHERE nspname = 'public'
) AS owned
WHERE owner <> (SELECT oid FROM pg_roles WHERE rolname = $1)
ORDER BY 1
"""


def _api_database_url(stack: Stack) -> str:
    """What `tenk serve` / `tenk worker` resolve with no TENK_DATABASE_URL: the embedded server's URL."""
    settings = Settings.model_validate({"data_dir": stack.root, "database": {"embedded_port": stack.pg.port}})
    assert settings.resolved_database_url == stack.pg.url
    return settings.resolved_database_url


@pytest.fixture
async def app_conn(stack: Stack) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(_api_database_url(stack))
    try:
        yield conn
    finally:
        await conn.close()


async def test_the_app_signs_in_as_a_role_with_no_privilege_beyond_logging_in(
    stack: Stack, app_conn: asyncpg.Connection
) -> None:
    role = await app_conn.fetchrow(
        "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls"
        " FROM pg_roles WHERE rolname = current_user"
    )
    assert role is not None
    assert dict(role) == {
        "rolname": stack.pg.app_role,
        "rolsuper": False,
        "rolcreaterole": False,
        "rolcreatedb": False,
        "rolreplication": False,
        "rolbypassrls": False,
    }
    assert stack.pg.app_role != stack.pg.superuser


@pytest.mark.parametrize("statement", SUPERUSER_ONLY)
async def test_the_app_role_cannot_do_what_only_a_superuser_may(app_conn: asyncpg.Connection, statement: str) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await app_conn.execute(statement)


async def test_the_app_role_owns_all_in_the_app_database_and_can_write(
    stack: Stack, app_conn: asyncpg.Connection
) -> None:
    assert await app_conn.fetch(_NOT_OWNED_BY_THE_APP, stack.pg.app_role) == []
    # The database itself is the superuser's: its settings are read by the superuser's sessions too.
    database = await app_conn.fetchrow(
        "SELECT pg_get_userbyid(datdba) AS owner, has_database_privilege(current_user, datname, 'CREATE')"
        " AS may_create FROM pg_database WHERE datname = current_database()"
    )
    assert database is not None
    assert dict(database) == {"owner": stack.pg.superuser, "may_create": True}
    sku = f"role-{uuid.uuid4().hex[:12]}"
    async with app_conn.transaction():
        # The triggers (invalidation outbox, search postings) run with it too.
        product_id = await app_conn.fetchval(
            "INSERT INTO products (sku, name, price_cents, stock) VALUES ($1, 'Role kettle', 100, 1) RETURNING id", sku
        )
        await app_conn.execute("UPDATE products SET stock = 2 WHERE id = $1", product_id)
        await app_conn.execute("DELETE FROM products WHERE id = $1", product_id)


async def test_every_migration_runs_as_the_app_role_in_a_database_it_owns(stack: Stack) -> None:
    name = f"tenk_role_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(stack.pg.superuser_url)
    await admin.execute(f'CREATE DATABASE "{name}" OWNER "{stack.pg.app_role}"')
    dsn = stack.pg.url_for(name)
    try:
        assert await migrate(dsn), "no migration ran"
        conn = await asyncpg.connect(dsn)
        try:
            # The ingest worker's partition upkeep: creating days ahead, dropping expired ones.
            await conn.execute("SELECT tenk_event_partition('2020-01-01')")
            done = await maintain(conn, retention_days=30)
            assert "events_20200101" in done.dropped
        finally:
            await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def _make_it_as_before_the_app_role(pg: EmbeddedPostgres) -> None:
    """What an older tenk left: the superuser owns the database, the schema and every table, partition,
    sequence and function, and there is no application role."""
    admin = await asyncpg.connect(pg.superuser_url)
    try:
        await admin.execute(f'ALTER DATABASE "{pg.database}" OWNER TO "{pg.superuser}"')
        await admin.execute("ALTER SCHEMA public OWNER TO pg_database_owner")
        await admin.execute(f'REVOKE ALL ON DATABASE "{pg.database}" FROM "{pg.app_role}"')
        await admin.execute(f'DROP ROLE "{pg.app_role}"')
        await migrate(pg.superuser_url)
        await admin.execute("SELECT tenk_event_partition('2020-01-01')")
        # public, as initdb leaves it since Postgres 15, belongs to whoever owns the database.
        not_the_superusers = await admin.fetch(_NOT_OWNED_BY_THE_APP, pg.superuser)
        assert [row[0] for row in not_the_superusers] == ["schema public"]
    finally:
        await admin.close()
    (pg.data_dir / "app-password").unlink()


async def test_a_data_dir_from_before_the_app_role_is_handed_over_to_it_on_the_next_start(stack_root: Path) -> None:
    pg = EmbeddedPostgres(stack_root / "postgres", free_port())
    try:
        pg.start()
        await _make_it_as_before_the_app_role(pg)
        pg.stop()
        assert pg.start() is True
        conn = await asyncpg.connect(pg.url)
        try:
            assert await conn.fetch(_NOT_OWNED_BY_THE_APP, pg.app_role) == []
            assert await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user") is False
            assert await migrate(pg.url) == []
            await conn.execute("INSERT INTO products (sku, name, price_cents, stock) VALUES ('old-1', 'Old', 1, 1)")
            # Dropping an expired partition needs its ownership: the superuser made this one.
            done = await maintain(conn, retention_days=30)
            assert "events_20200101" in done.dropped
        finally:
            await conn.close()
        # Starting again changes nothing and keeps the password the app already has.
        url = pg.url
        pg.stop()
        pg.start()
        conn = await asyncpg.connect(url)
        await conn.close()
    finally:
        pg.stop()


async def test_a_server_from_before_the_app_role_still_running_is_handed_over_by_the_next_up(
    stack_root: Path,
) -> None:
    pg = EmbeddedPostgres(stack_root / "postgres", free_port())
    try:
        pg.start()
        await _make_it_as_before_the_app_role(pg)
        assert pg.start() is False, "the running server is reused"
        conn = await asyncpg.connect(pg.url)
        try:
            assert await conn.fetch(_NOT_OWNED_BY_THE_APP, pg.app_role) == []
            done = await maintain(conn, retention_days=30)
            assert "events_20200101" in done.dropped
        finally:
            await conn.close()
    finally:
        pg.stop()


@pytest.mark.cluster
async def test_a_replica_from_before_the_app_role_serves_the_app_role_after_its_next_start(stack_root: Path) -> None:
    pg = EmbeddedPostgres(stack_root / "postgres", free_port())
    replica = LocalPgReplica(stack_root / "replica", free_port(), pg)
    try:
        pg.start()
        replica.start()
        replica.stop()
        # An older tenk wrote only the superuser's password next to the replica.
        (replica.data_dir / "app-password").unlink()
        replica.start()
        conn = await asyncpg.connect(replica.url)
        try:
            assert await conn.fetchval("SELECT current_user") == pg.app_role
            assert await conn.fetchval("SELECT pg_is_in_recovery()") is True
            # What the catalog asks a replica before reading from it.
            assert await conn.fetchval("SELECT pg_last_wal_replay_lsn() IS NOT NULL") is True
        finally:
            await conn.close()
    finally:
        replica.stop()
        pg.stop()


# Each shadows a catalog function the superuser's start-up SQL calls; run as the superuser, it would
# make the app role a superuser. It also leaves a mark, so that a run is seen even if the ALTER fails.
_SHADOWS = """
CREATE TABLE public.hijacks (name text);
CREATE FUNCTION public.pg_is_in_recovery() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacks VALUES ('pg_is_in_recovery');
    EXECUTE 'ALTER ROLE {role} SUPERUSER';
    RETURN false;
END $$;
CREATE FUNCTION public.current_database() RETURNS name LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacks VALUES ('current_database');
    EXECUTE 'ALTER ROLE {role} SUPERUSER';
    RETURN '{database}';
END $$;
CREATE FUNCTION public.format(text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacks VALUES ('format');
    EXECUTE 'ALTER ROLE {role} SUPERUSER';
    RETURN pg_catalog.format($1, $2);
END $$;
CREATE FUNCTION public.format(text, text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacks VALUES ('format');
    EXECUTE 'ALTER ROLE {role} SUPERUSER';
    RETURN pg_catalog.format($1, $2, $3);
END $$;
ALTER DATABASE {database} SET search_path = public, pg_catalog;
"""


async def test_functions_the_app_role_plants_on_the_search_path_never_run_as_the_superuser(stack_root: Path) -> None:
    pg = EmbeddedPostgres(stack_root / "postgres", free_port())
    try:
        pg.start()
        admin = await asyncpg.connect(pg.superuser_url)
        try:
            # As an older tenk left it: the app role owned the database, so it could set its search_path.
            await admin.execute(f'ALTER DATABASE "{pg.database}" OWNER TO "{pg.app_role}"')
        finally:
            await admin.close()
        conn = await asyncpg.connect(pg.url)
        try:
            await conn.execute(_SHADOWS.format(role=pg.app_role, database=pg.database))
        finally:
            await conn.close()

        assert pg.start() is False, "the running server is reused, and the superuser's start-up SQL runs"

        conn = await asyncpg.connect(pg.url)
        try:
            assert await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user") is False
            assert await conn.fetch("SELECT name FROM public.hijacks") == []
            # The planted setting is gone, and the app role can no longer plant one.
            assert await conn.fetchval("SHOW search_path") == '"$user", public'
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(f'ALTER DATABASE "{pg.database}" SET search_path = public, pg_catalog')
        finally:
            await conn.close()
    finally:
        pg.stop()
