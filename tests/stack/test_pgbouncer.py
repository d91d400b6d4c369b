"""The API behind a real PgBouncer in transaction mode: catalog writes and reads, listings, search."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx
import pytest

from harness.clients import AUTH
from harness.stack import Stack
from tenk.stack.pgbouncer import LocalPgBouncer
from tests.stack.listeners import listening_on
from tests.stack.pgbouncer import pgbouncer_in_front
from tests.support.waiting import eventually

pytestmark = pytest.mark.cluster

# PgBouncer holds a client's query while it retries Postgres (query_wait_timeout): the client gives up first.
CLIENT_WAIT_S = 3.0
# PgBouncer retries a server login every second (server_login_retry): with room for a busy machine.
RECONNECT_SEEN_S = 30.0


async def test_pgbouncer_admits_the_password_and_refuses_a_wrong_one(bouncer: LocalPgBouncer) -> None:
    conn = await asyncpg.connect(bouncer.url, statement_cache_size=0)
    try:
        assert await conn.fetchval("SELECT $1::int + 1", 41) == 42
    finally:
        await conn.close()
    # PgBouncer ends a failed SCRAM exchange with a message asyncpg reports as a protocol violation.
    with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.ProtocolViolationError), match="authentication"):
        await asyncpg.connect(bouncer.url.replace(bouncer.password, "not-the-password"), statement_cache_size=0)


async def test_pgbouncer_pools_by_transaction(bouncer: LocalPgBouncer) -> None:
    # In session mode a client keeps its server connection; here it gives it back after every
    # transaction, so once another client holds that one, the next statement runs on another server.
    first = await asyncpg.connect(bouncer.url, statement_cache_size=0)
    second = await asyncpg.connect(bouncer.url, statement_cache_size=0)
    try:
        before = await first.fetchval("SELECT pg_backend_pid()")
        async with second.transaction():
            # PgBouncer reuses the most recently released server connection: the one `first` just had.
            held = await second.fetchval("SELECT pg_backend_pid()")
            after = await first.fetchval("SELECT pg_backend_pid()")
        assert held == before
        assert after != before
    finally:
        await first.close()
        await second.close()


async def test_catalog_writes_reads_listings_and_search_work_through_the_pooler(
    pooled_client: httpx.AsyncClient,
) -> None:
    sku = f"pool-{uuid.uuid4().hex[:12]}"
    created = await pooled_client.post(
        "/products",
        json={
            "sku": sku,
            "name": "Pooled kettle",
            "description": "boils through pgbouncer",
            "price_cents": 1200,
            "stock": 3,
        },
        headers=AUTH,
    )
    assert created.status_code == 201, created.text
    product_id = created.json()["id"]
    for _ in range(3):  # the miss, then the cached copy
        got = await pooled_client.get(f"/products/{product_id}")
        assert got.status_code == 200
        assert got.json()["sku"] == sku
    patched = await pooled_client.patch(f"/products/{product_id}", json={"stock": 4}, headers=AUTH)
    assert patched.status_code == 200, patched.text
    assert (await pooled_client.get(f"/products/{product_id}")).json()["stock"] == 4
    page = await pooled_client.get("/products", params={"limit": 5})
    assert page.status_code == 200
    assert len(page.json()["items"]) == 5
    found = await pooled_client.get("/search", params={"q": "kettle"})
    assert found.status_code == 200, found.text
    assert (await pooled_client.delete(f"/products/{product_id}", headers=AUTH)).status_code == 204
    assert (await pooled_client.get(f"/products/{product_id}")).status_code == 404


async def test_pgbouncer_and_its_clients_send_no_password_to_a_freed_port(private_stack: Stack) -> None:
    with pgbouncer_in_front(private_stack) as bouncer:

        def attempts() -> int:
            return bouncer.log_tail(10_000).count("connect failed")

        assert await _select_one(bouncer.url) == 1
        private_stack.pg.stop()
        # PgBouncer logs in to Postgres with the app role's password, which it keeps: it reconnects with it.
        with listening_on(private_stack.pg.port, "postgres") as heard:
            before = attempts()
            with pytest.raises(TimeoutError):
                await _select_one(bouncer.url, timeout_s=CLIENT_WAIT_S)
            await eventually(
                lambda: heard.snapshot() or attempts() >= before + 1,
                RECONNECT_SEEN_S,
                lambda: f"PgBouncer to try Postgres:\n{bouncer.log_tail()}",
            )
            assert heard.snapshot() == []
        bouncer.stop()
        with listening_on(bouncer.port, "postgres") as heard:
            try:
                failure: object = await _select_one(bouncer.url, timeout_s=CLIENT_WAIT_S)
            except Exception as exc:  # what the client met is the outcome: PgBouncer is gone
                failure = exc
            assert heard.snapshot() == []
        assert isinstance(failure, (FileNotFoundError, ConnectionRefusedError)), failure


async def _select_one(url: str, timeout_s: float = 10.0) -> object:
    conn = await asyncpg.connect(url, statement_cache_size=0, timeout=timeout_s)
    try:
        return await asyncio.wait_for(conn.fetchval("SELECT 1"), timeout_s)
    finally:
        await conn.close(timeout=timeout_s)
