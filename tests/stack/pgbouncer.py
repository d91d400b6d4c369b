"""A PgBouncer in transaction mode in front of a test stack's Postgres, and the pooler tests' fixtures
(registered for every test module through `pytest_plugins` in tests/conftest.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from harness.stack import Stack
from tenk.app import create_app
from tenk.stack import start_on_free_port
from tenk.stack.pgbouncer import LocalPgBouncer, PgBouncerMissingError, pgbouncer_path
from tests.support.inprocess import app_in_process

# Fewer server connections than the clients use (the API's pool, the worker's writers), so that
# transactions of one client land on different server connections, as on a busy pooler.
POOL_SIZE = 3


@contextmanager
def pgbouncer_in_front(stack: Stack) -> Iterator[LocalPgBouncer]:
    try:
        pgbouncer_path()
    except PgBouncerMissingError as exc:
        pytest.skip(str(exc))
    root = Path(tempfile.mkdtemp(prefix="tenk-pgb-", dir="/tmp"))
    bouncer = start_on_free_port(
        lambda port: LocalPgBouncer(
            root / "pgbouncer",
            port,
            str(stack.pg.socket_host),
            stack.pg.port,
            stack.pg.app_role,
            stack.pg.app_password,
            pool_size=POOL_SIZE,
        )
    )
    try:
        yield bouncer
    finally:
        bouncer.stop()
        shutil.rmtree(root, ignore_errors=True)


def pooled_env(stack: Stack, bouncer: LocalPgBouncer) -> dict[str, str]:
    """Environment overrides for a tenk process that must reach Postgres only through the pooler."""
    return {
        "TENK_DATABASE_URL": bouncer.url,
        "TENK_DATABASE_POOLER": "transaction",
        "TENK_DATABASE_DIRECT_URL": stack.pg.url,
    }


def pooled_env_over_tcp(stack: Stack, bouncer: LocalPgBouncer) -> dict[str, str]:
    """`pooled_env` with the pooler and Postgres reached on their ports, for a test that tells the two apart
    by the process's TCP peers (a Unix socket's peer is not to be seen from the client's side)."""
    on_its_port = f"postgresql://{bouncer.user}:{bouncer.password}@127.0.0.1:{bouncer.port}/{bouncer.database}"
    return {
        **pooled_env(stack, bouncer),
        "TENK_DATABASE_URL": on_its_port,
        "TENK_DATABASE_DIRECT_URL": stack.env_over_tcp()["TENK_DATABASE_URL"],
    }


@pytest.fixture(scope="module")
def bouncer(stack: Stack) -> Iterator[LocalPgBouncer]:
    with pgbouncer_in_front(stack) as started:
        yield started


@pytest.fixture(scope="module")
async def pooled_client(stack: Stack, bouncer: LocalPgBouncer) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process API whose every Postgres connection goes through the transaction pooler."""
    settings = stack.settings(database={"url": bouncer.url, "pooler": "transaction", "direct_url": stack.pg.url})
    async with app_in_process(create_app(settings)) as client:
        yield client
