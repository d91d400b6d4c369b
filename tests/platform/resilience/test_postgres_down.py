"""Postgres shutting down, failing over or refusing connections is a 503 with Retry-After, never a 500.

`tenk down` stops Postgres with a fast shutdown: queries in flight get AdminShutdownError, new
connections CannotConnectNowError, pooled ones die under their next query. A failover can leave us on
a read-only standby (ReadOnlySQLTransactionError). None of these is a bug in the request.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from collections.abc import Callable

import asyncpg
import httpx
import pytest

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.platform.outages import postgres_is_down
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

# Transient or infrastructure failures, by the class asyncpg raises (the class carries the SQLSTATE).
DOWN = [
    asyncpg.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.CrashShutdownError("terminating connection because of crash of another server process"),
    asyncpg.CannotConnectNowError("the database system is shutting down"),
    asyncpg.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
    asyncpg.SerializationError("could not serialize access"),
    asyncpg.DeadlockDetectedError("deadlock detected"),
    asyncpg.LockNotAvailableError("could not obtain lock"),
    asyncpg.QueryCanceledError("canceling statement due to statement timeout"),
    asyncpg.TooManyConnectionsError("sorry, too many clients already"),
    asyncpg.DiskFullError("could not extend file"),
    asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.ConnectionFailureError("connection failure"),
    asyncpg.InterfaceError("cannot call Connection.fetchval(): connection is closed"),
    asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
    ConnectionRefusedError(111, "Connection refused"),
    ConnectionResetError(104, "Connection reset by peer"),
    TimeoutError(),
]
# Bugs or bad input: retrying cannot help, so they must not be dressed up as an outage.
NOT_DOWN = [
    asyncpg.UniqueViolationError("duplicate key value"),
    asyncpg.UndefinedTableError("relation does not exist"),
    asyncpg.NumericValueOutOfRangeError("bigint out of range"),
    asyncpg.exceptions._base.DataError("invalid input for query argument $1"),
    ValueError("not an outage"),
]


@pytest.mark.parametrize("exc", DOWN, ids=lambda e: type(e).__name__)
def test_outages_are_classified_as_postgres_down(exc: Exception) -> None:
    assert postgres_is_down(exc)


@pytest.mark.parametrize("exc", NOT_DOWN, ids=lambda e: type(e).__name__)
def test_bugs_and_bad_input_are_not_postgres_down(exc: Exception) -> None:
    assert not postgres_is_down(exc)


async def _terminate_api_backends(stack: Stack) -> None:
    conn = await asyncpg.connect(stack.pg.url)
    try:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'tenk' AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()


def _assert_no_500(seen: list[httpx.Response]) -> None:
    statuses = Counter(r.status_code for r in seen)
    assert set(statuses) <= {200, 201, 404, 503}, statuses
    for response in seen:
        if response.status_code == 503:
            assert int(response.headers["retry-after"]) >= 1, response.text


async def test_writes_on_a_read_only_database_answer_503_with_retry_after(
    private_stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    api = spawn_api(private_stack)
    # The database's settings are the superuser's to change (the app role does not own it).
    admin = await asyncpg.connect(private_stack.pg.superuser_url)
    try:
        # What a client sees after failing over to a standby that is still read-only.
        await admin.execute("ALTER DATABASE tenk SET default_transaction_read_only = on")
        await _terminate_api_backends(private_stack)
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            seen = []
            for i in range(10):
                seen.append(await http.post("/tasks", json={"title": f"t{i}"}, headers=AUTH))
                seen.append(await http.patch("/products/3", json={"stock": i}, headers=AUTH))
            _assert_no_500(seen)
            assert any(r.status_code == 503 and r.json()["error"]["code"] == "database_unavailable" for r in seen)
            await admin.execute("ALTER DATABASE tenk RESET default_transaction_read_only")
            await _terminate_api_backends(private_stack)

            async def writes_back() -> bool:
                return (await http.post("/tasks", json={"title": "back"}, headers=AUTH)).status_code == 201

            await eventually(writes_back, deadline_s(), "writes to come back after the database did", every=0.05)
    finally:
        await admin.close()


def _ok(response: httpx.Response) -> bool:
    return response.status_code == 200


def _read_paths() -> itertools.cycle[str]:
    paths = []
    for i in range(1, 201):
        paths += [
            f"/products/{i}",
            "/products?limit=5",
            f"/tasks/{1 + i % 50}",
            "/tasks?limit=5",
            f"/search?q=word{i}",
            f"/events/{uuid.UUID(int=i)}",
            "/sources/sensor-1/events",
        ]
    return itertools.cycle(paths)


async def test_fast_shutdown_and_killed_backends_answer_503_never_500(
    private_stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    # No per-process cache: every product read reaches Redis or Postgres.
    api = spawn_api(private_stack, TENK_CATALOG_LOCAL_CACHE="false")
    seen: list[httpx.Response] = []
    paths = _read_paths()
    stop = asyncio.Event()

    async def reader(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            seen.append(await http.get(next(paths), headers=AUTH))

    def answered_from_now(predicate: Callable[[httpx.Response], bool]) -> Callable[[], bool]:
        """A check: has a response from now on matched `predicate`?"""
        start = len(seen)
        return lambda: any(predicate(r) for r in seen[start:])

    async with httpx.AsyncClient(base_url=api.base_url, timeout=15) as http:
        readers = [asyncio.create_task(reader(http)) for _ in range(16)]
        try:
            await eventually(answered_from_now(_ok), 60, "the API to answer", every=0.05)
            for _ in range(10):
                await _terminate_api_backends(private_stack)
                await eventually(answered_from_now(_ok), 60, "the API to recover from killed backends", every=0.05)
            # What `tenk down` does: a fast shutdown under load, then the server comes back.
            await asyncio.to_thread(private_stack.pg.stop)
            await eventually(
                answered_from_now(lambda r: r.status_code == 503), 60, "a 503 while Postgres is down", every=0.05
            )
            await asyncio.to_thread(private_stack.pg.start)
            await eventually(
                answered_from_now(lambda r: r.status_code == 200 and "/tasks" in str(r.url)),
                60,
                "tasks to come back",
                every=0.05,
            )
        finally:
            stop.set()
            await asyncio.gather(*readers)
    _assert_no_500(seen)
    assert "unhandled error" not in api.server.log.read_text()
