from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated

from fastapi import APIRouter, Depends, Path
from starlette.responses import Response

from examples.widgets import queries
from examples.widgets.schemas import Widget, WidgetIn
from tenk.platform import (
    NotFoundError,
    Reply,
    ReplyRoute,
    app_state,
    created,
    hot,
    no_content,
    require_reader,
    require_writer,
)
from tenk.platform.readthrough import ReadCache, ReadThrough, load_by_id, load_by_ids

# Cached in each process, in Redis, and invalidated everywhere by every write to the table.
WIDGETS = ReadThrough(
    name="widgets",
    item="widget",
    table="widgets",
    load_one=load_by_id(queries.WIDGET_BY_ID),
    load_many=load_by_ids(queries.WIDGETS_BY_IDS),
    x_cache=True,
)
Widgets = Annotated[ReadCache, app_state("widgets")]
WidgetId = Annotated[int, Path(ge=1, le=2**63 - 1)]

router = APIRouter(prefix="/widgets", tags=["widgets"], route_class=ReplyRoute)


@router.get("/{widget_id}", response_model=Widget, dependencies=[Depends(require_reader)])
@hot
def get_widget(widget_id: WidgetId, widgets: Widgets) -> Reply | Awaitable[Reply]:
    cached = widgets.cached(widget_id)  # a hit answers at once, with no coroutine
    return widgets.load(widget_id) if cached is None else cached


@router.post("", status_code=201, response_model=Widget, dependencies=[Depends(require_writer)])
@hot
async def create_widget(widget: WidgetIn, widgets: Widgets) -> Reply:
    widget_id, row = await widgets.pg.fetchrow(queries.INSERT_WIDGET, widget.name, widget.price_cents)
    await widgets.invalidate(widget_id)  # its id may be remembered as missing
    return created(row.encode(), router.prefix)


@router.put("/{widget_id}", response_model=Widget, dependencies=[Depends(require_writer)])
@hot
async def replace_widget(widget_id: WidgetId, widget: WidgetIn, widgets: Widgets) -> Reply:
    row = await widgets.pg.fetchval(queries.REPLACE_WIDGET, widget_id, widget.name, widget.price_cents)
    if row is None:
        raise NotFoundError("no such widget", field="path.widget_id")
    await widgets.invalidate(widget_id)
    return Reply(200, row.encode())


@router.delete("/{widget_id}", status_code=204, response_class=Response, dependencies=[Depends(require_writer)])
async def delete_widget(widget_id: WidgetId, widgets: Widgets) -> Reply:
    if await widgets.pg.fetchval(queries.DELETE_WIDGET, widget_id) is None:
        raise NotFoundError("no such widget", field="path.widget_id")
    await widgets.invalidate(widget_id)
    return no_content()
