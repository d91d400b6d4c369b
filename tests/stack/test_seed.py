"""Seeding fills an empty catalogue without leaving work behind for the API, and leaves every write path armed."""

from __future__ import annotations

import asyncpg

from harness.stack import Stack, fresh_database
from tenk.stack.migrate import migrate
from tenk.stack.seed import seed


async def test_seeding_an_empty_catalogue_leaves_no_invalidations_to_deliver_and_later_writes_record_theirs(
    stack: Stack,
) -> None:
    dsn = await fresh_database(stack, "tenk_seeded_outbox")
    await migrate(dsn)
    assert (await seed(dsn, 500, 0))["products"] == 500
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM catalog_invalidations") == 0
        await conn.execute("UPDATE products SET price_cents = price_cents + 1 WHERE id = 7")
        assert await conn.fetch("SELECT product_id FROM catalog_invalidations") == [(7,)]
    finally:
        await conn.close()
