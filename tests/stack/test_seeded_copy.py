"""A seeded copy starts every use as seeded: whatever the last use wrote, from a template filled once, and
made again only when what fills it changes."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from harness.stack import Stack
from tenk.stack.migrate import migrate
from tenk.stack.seed import fingerprint, seed
from tenk.stack.seeded_copy import SeededCopy


class Filler:
    """Migrates and seeds a template, counting how often it was asked to."""

    def __init__(self, products: int, tasks: int, fail: bool = False) -> None:
        self.products, self.tasks, self.fail, self.calls = products, tasks, fail, 0

    def __call__(self, url: str) -> None:
        self.calls += 1
        asyncio.run(migrate(url))
        if self.fail:
            raise RuntimeError("the machine went away mid-seed")
        asyncio.run(seed(url, self.products, self.tasks))


def _name() -> str:
    return f"tenk_copy_{uuid.uuid4().hex[:8]}"


def _copy(stack: Stack, name: str, filler: Filler) -> SeededCopy:
    return SeededCopy(stack.pg, name, fingerprint(filler.products, filler.tasks), filler)


async def _rows(url: str) -> dict[str, object]:
    """Every row of the tables a use writes, as text, and where their ids go next."""
    conn = await asyncpg.connect(url)
    try:
        found: dict[str, object] = {}
        for table in ("products", "tasks", "events", "search_postings", "catalog_invalidations"):
            found[table] = sorted(row[0] for row in await conn.fetch(f"SELECT {table}::text FROM {table}"))
        for sequence in ("products_id_seq", "tasks_id_seq"):
            found[sequence] = tuple(await conn.fetchrow(f"SELECT last_value, is_called FROM {sequence}"))
        return found
    finally:
        await conn.close()


async def _write_everything(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("DELETE FROM products WHERE id = 1")
        await conn.execute(
            "INSERT INTO products (sku, name, description, price_cents, stock) "
            "VALUES ('SKU-00000001', 'a re-used sku', '', 1, 1)"
        )
        await conn.execute("UPDATE products SET price_cents = 5 WHERE id = 7")
        await conn.execute("INSERT INTO tasks (title) VALUES ('written by the last use')")
        await conn.execute("DELETE FROM tasks WHERE id = 3")
        await conn.execute(
            "INSERT INTO events (event_id, source, ts, payload) VALUES ($1, 'last-use', now(), '{}')", uuid.uuid4()
        )
    finally:
        await conn.close()


def test_each_use_starts_from_the_seeded_rows_whatever_the_last_one_wrote(stack: Stack) -> None:
    filler = Filler(120, 15)
    copy = _copy(stack, _name(), filler)
    assert copy.renew() is True  # no template yet: made
    seeded = asyncio.run(_rows(copy.url))
    assert len(seeded["products"]) == 120  # type: ignore[arg-type]
    asyncio.run(_write_everything(copy.url))
    assert asyncio.run(_rows(copy.url)) != seeded
    assert copy.renew() is False  # the template, kept
    assert asyncio.run(_rows(copy.url)) == seeded
    assert filler.calls == 1


def test_the_template_is_made_again_when_what_fills_it_changes(stack: Stack) -> None:
    name = _name()
    first = Filler(120, 15)
    assert _copy(stack, name, first).renew() is True
    second = Filler(150, 15)
    copy = _copy(stack, name, second)
    assert copy.renew() is True
    assert copy.renew() is False
    assert len(asyncio.run(_rows(copy.url))["products"]) == 150  # type: ignore[arg-type]
    assert (first.calls, second.calls) == (1, 1)


def test_a_template_whose_filling_was_interrupted_is_made_again(stack: Stack) -> None:
    name = _name()
    with pytest.raises(RuntimeError, match="mid-seed"):
        _copy(stack, name, Filler(120, 15, fail=True)).renew()
    copy = _copy(stack, name, Filler(120, 15))
    assert copy.template_fingerprint() == ""  # never finished: no fingerprint
    assert copy.renew() is True
    assert len(asyncio.run(_rows(copy.url))["products"]) == 120  # type: ignore[arg-type]


def test_a_session_left_on_the_copy_does_not_stop_the_next_use_and_nobody_can_open_the_template(
    stack: Stack,
) -> None:
    copy = _copy(stack, _name(), Filler(120, 15))
    copy.renew()

    async def left_open_then_renewed() -> None:
        # A run killed mid-ladder leaves its target connected; the next run's copy ends that session.
        conn = await asyncpg.connect(copy.url)
        await asyncio.to_thread(copy.renew)
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError)):
            await conn.fetchval("SELECT 1")
        conn.terminate()
        # The app role owns what is in the template, but cannot reach it to change it.
        with pytest.raises(asyncpg.PostgresError, match="not currently accepting connections"):
            await asyncpg.connect(stack.pg.url_for(copy.template))

    asyncio.run(left_open_then_renewed())
    assert len(asyncio.run(_rows(copy.url))["products"]) == 120  # type: ignore[arg-type]


def test_a_name_that_is_not_a_plain_identifier_is_refused(stack: Stack) -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        SeededCopy(stack.pg, 'lab"; DROP DATABASE tenk; --', fingerprint(1, 1), Filler(1, 1))
