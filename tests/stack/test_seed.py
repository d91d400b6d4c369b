"""Seeding fills an empty catalogue without leaving work behind for the API, and leaves every write path armed."""

from __future__ import annotations

import asyncpg

from tenk.stack.migrate import migrate
from tenk.stack.seed import restore_products, seed
from tests.support.stack import Stack, fresh_database


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


async def test_restoring_puts_back_deleted_and_changed_seeded_products_and_leaves_the_rest(stack: Stack) -> None:
    dsn = await fresh_database(stack, "tenk_restored_catalogue")
    await migrate(dsn)
    await seed(dsn, 300, 0)
    conn = await asyncpg.connect(dsn)
    try:
        # Everything but updated_at, which says when a row was last written (restored rows: now).
        catalogue = (
            "SELECT id, sku, name, description, price_cents, stock, search FROM products WHERE id <= 300 ORDER BY id"
        )
        seeded = await conn.fetch(catalogue)
        await conn.execute("DELETE FROM products WHERE id IN (3, 150, 300)")
        await conn.execute("UPDATE products SET price_cents = 1, name = 'changed' WHERE id = 42")
        await conn.execute(
            "INSERT INTO products (id, sku, name, description, price_cents, stock) "
            "VALUES (301, 'SKU-X', 'kept', 'a product a person added', 5, 1)"
        )
        assert await restore_products(dsn, 300) == 4
        assert await conn.fetch(catalogue) == seeded
        assert await conn.fetchval("SELECT name FROM products WHERE id = 301") == "kept"
        assert await restore_products(dsn, 300) == 0  # nothing left to put back
    finally:
        await conn.close()
