"""Cached reads by id, for any table: declare what to read, and every app that serves it gets the cache.

    WIDGETS = ReadThrough(
        name="widgets",
        item="widget",
        table="widgets",
        load_one=load_by_id(queries.WIDGET_BY_ID),
        load_many=load_by_ids(queries.WIDGETS_BY_IDS),  # optional: the misses of one turn in one query
        settings=CacheSettings(local_ttl_s=0.2, ttl_jitter=0),
    )
    Widgets = Annotated[ReadCache, app_state("widgets")]

    @router.get("/{widget_id}")
    @hot
    def get_widget(widget_id: WidgetId, widgets: Widgets) -> Reply | Awaitable[Reply]:
        cached = widgets.cached(widget_id)
        return widgets.load(widget_id) if cached is None else cached

    @router.put("/{widget_id}")
    async def put_widget(widget_id: WidgetId, widget: WidgetIn, widgets: Widgets) -> Response:
        row = await widgets.pg.fetchval(queries.UPDATE_WIDGET, widget_id, widget.name)
        await widgets.invalidate(widget_id)
        ...

    app = create_app(settings, domains=[Domain(router, WIDGETS.lifespan)])

What each call costs, and when to use it:

- `cache.cached(id)`: a plain call, no coroutine: one dict lookup, and the ready `Reply` of a hit (its
  headers made once, at the fill), or None. A hot handler answers a hit at once with it.
- `await cache.load(id)`: past this process's caches: Redis (one MGET), then Postgres (`load_one`, or
  `load_many` for the misses of one turn), single-flight per id; what it reads is kept. An id past the
  highest one stored, or remembered missing, is the 404 without a read.
- `await cache.invalidate(id)`: after the write has committed. Drops the copies here, in Redis and, once
  every process has confirmed (or `invalidation_ack_timeout_s` ran out), in every other process.
- `WIDGETS.lifespan(app)`: opens the cache over the app's pools as `app.state.widgets`, starts its
  invalidation listener and outbox replay, and stops them with the app. Nothing is read ahead of a
  request: no pre-warming, no background refresh. An app of one's own, without tenk's settings tree,
  opens its pools and runs `async with WIDGETS.serving(app, pg, redis, settings):` in its lifespan.
- `WIDGETS.outbox_sql()`: the migration for the table's outbox trigger, run once; without it (and
  `outbox=False`), a write made around `invalidate` (psql, another service) lasts its copies' TTL.

A read from a cache or not: a hit is `cached` answering, and with `x_cache=True` every 200 says so in
`X-Cache: HIT` or `MISS`. `CacheSettings(local_only=True)` uses no Redis at all; `ttl_jitter=0` makes
every TTL exact, counted from the fill.
"""

from tenk.cache_settings import CacheSettings
from tenk.platform.readthrough._cache import ReadCache, ReadThrough
from tenk.platform.readthrough._changes import Changes
from tenk.platform.readthrough._keys import KeySpace
from tenk.platform.readthrough._reads import LoadMany, LoadOne, Row, load_by_id, load_by_ids
from tenk.platform.readthrough._replicas import Replicas

__all__ = [
    "CacheSettings",
    "Changes",
    "KeySpace",
    "LoadMany",
    "LoadOne",
    "ReadCache",
    "ReadThrough",
    "Replicas",
    "Row",
    "load_by_id",
    "load_by_ids",
]
