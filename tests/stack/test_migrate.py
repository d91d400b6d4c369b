from __future__ import annotations

import asyncpg

from harness.stack import Stack
from tenk.stack.migrate import bundled_migrations, migrate


async def test_migrations_are_numbered_uniquely_and_in_order() -> None:
    versions = [m.version for m in bundled_migrations()]
    assert versions == sorted(set(versions))
    assert versions[0] == 1


async def test_running_migrations_again_changes_nothing(stack: Stack) -> None:
    assert await migrate(stack.pg.url) == []
    conn = await asyncpg.connect(stack.pg.url)
    try:
        applied = await conn.fetchval("SELECT count(*) FROM schema_migrations")
    finally:
        await conn.close()
    assert applied == len(bundled_migrations())
