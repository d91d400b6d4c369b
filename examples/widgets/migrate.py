"""Make the widgets table and its outbox: `python -m examples.widgets.migrate "$TENK_DATABASE_URL"`, once.

The table is `schema.sql`. The outbox (its table, its sequence, and the trigger that records every write
to `widgets`) is the platform's template rendered for this cache, `WIDGETS.outbox_sql()`: no trigger is
written by hand.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import asyncpg

from examples.widgets.routes import WIDGETS

SCHEMA = Path(__file__).with_name("schema.sql")


async def migrate(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        await conn.execute(SCHEMA.read_text())
        await conn.execute(WIDGETS.outbox_sql())


async def main(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
