"""What a read-through cache is declared with: names fit for keys, metrics and SQL, and the outbox
migration each table needs, made from one template (the catalog's migration 0003 is its rendering)."""

from __future__ import annotations

import dataclasses
from importlib import resources

import asyncpg
import orjson
import pytest
from fastapi import FastAPI

from examples.widgets.routes import WIDGETS, router
from harness.stack import Stack
from tenk.app import Domain, create_app
from tenk.catalog.service import PRODUCTS
from tenk.platform.readthrough import CacheSettings, ReadCache, ReadThrough
from tests.platform.readthrough.widgets import SCHEMA
from tests.support.inprocess import app_in_process


def test_the_catalogs_outbox_migration_is_the_template_rendered_for_products() -> None:
    # Databases migrated before the template existed ran these statements: they must stay what it renders.
    migration = resources.files("tenk.stack.migrations").joinpath("0003_catalog_invalidations.sql").read_text()
    assert PRODUCTS.outbox_sql() in migration


async def test_the_widgets_outbox_is_the_template_rendered_for_widgets_not_sql_by_hand(widgets_db: str) -> None:
    by_hand = SCHEMA.read_text().upper()
    assert "CREATE TRIGGER" not in by_hand, "schema.sql writes trigger SQL"
    assert "CREATE FUNCTION" not in by_hand, "schema.sql writes trigger SQL"
    conn = await asyncpg.connect(widgets_db)
    try:
        triggers = await conn.fetch(
            "SELECT tgname, tgrelid::regclass::text AS tbl FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname"
        )
    finally:
        await conn.close()
    assert [(t["tgname"], t["tbl"]) for t in triggers] == [("widgets_record_invalidation", "widgets")]


@pytest.mark.parametrize("field", ["name", "item", "table", "key"])
def test_a_name_that_is_not_a_plain_identifier_is_refused_naming_the_field(field: str) -> None:
    names = {"name": "widgets", "item": "widget", "table": "widgets", "key": "id", field: "widgets; DROP TABLE x"}
    with pytest.raises(ValueError, match=f"{field}="):
        ReadThrough(**names, load_one=WIDGETS.load_one)  # type: ignore[arg-type]


async def test_settings_may_come_from_a_branch_of_the_tree_when_the_lifespan_starts(
    stack: Stack, widgets_db: str
) -> None:
    from_tree = dataclasses.replace(WIDGETS, settings=lambda tree: tree.catalog)
    settings = stack.settings(database={"url": widgets_db}, catalog={"local_ttl_s": 42.0, "local_only": True})
    app = create_app(settings, domains=[Domain(router, from_tree.lifespan)])
    async with app_in_process(app):
        cache: ReadCache = app.state.widgets
        assert (cache.settings.local_ttl_s, cache.settings.local_only) == (42.0, True)
    assert not hasattr(app.state, "widgets"), "the lifespan left its cache behind"


async def test_an_app_without_tenks_settings_serves_the_cache_on_its_own_pools(widgets_db: str) -> None:
    # A builder's app: its own settings, its own pools, nothing of tenk's tree in app.state.
    app = FastAPI()
    async with asyncpg.create_pool(widgets_db, min_size=1, max_size=2) as pg:
        widget_id = await pg.fetchval("INSERT INTO widgets (name, price_cents) VALUES ('Own', 7) RETURNING id")
        async with WIDGETS.serving(app, pg, None, CacheSettings(local_only=True)) as cache:
            assert app.state.widgets is cache
            assert (b"x-cache", b"MISS") in (await cache.reply(widget_id)).headers
            hit = cache.cached(widget_id)
            assert hit is not None
            assert (b"x-cache", b"HIT") in hit.headers
        assert not hasattr(app.state, "widgets"), "serving left its cache behind"
        # tenk's lifespan, with the settings in the declaration, reads only the pools from app.state.
        app.state.pg, app.state.redis = pg, None
        declared = dataclasses.replace(WIDGETS, settings=CacheSettings(local_only=True))
        async with declared.lifespan(app):
            assert app.state.widgets.cached(widget_id) is None  # a cache of its own, empty
            assert (await app.state.widgets.reply(widget_id)).status == 200


async def test_the_loaders_made_from_queries_answer_an_items_json_and_leave_out_the_missing(widgets_db: str) -> None:
    async with asyncpg.create_pool(widgets_db, min_size=1, max_size=1) as pg:
        found = await pg.fetchval("INSERT INTO widgets (name, price_cents) VALUES ('Loaded', 3) RETURNING id")
        absent = found + 10**6
        one = await WIDGETS.load_one(pg, found)
        assert isinstance(one, str)
        assert orjson.loads(one) == {"id": found, "name": "Loaded", "price_cents": 3}
        assert await WIDGETS.load_one(pg, absent) is None
        assert WIDGETS.load_many is not None
        assert await WIDGETS.load_many(pg, [found, absent]) == {found: one}
