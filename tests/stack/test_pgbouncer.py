"""The API behind a real PgBouncer in transaction mode: catalog writes and reads, listings, search."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import pytest

from tenk.stack.pgbouncer import LocalPgBouncer
from tests.support.clients import AUTH

pytestmark = pytest.mark.cluster


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
