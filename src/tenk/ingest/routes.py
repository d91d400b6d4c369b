from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

import orjson
from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from tenk.connections import REDIS_DOWN
from tenk.errors import InvalidInputError, NotFoundError, error_response
from tenk.ingest import keys, queries
from tenk.ingest.accept import Outcome, accept_batch, accept_one
from tenk.ingest.schemas import (
    MAX_BATCH,
    SOURCE_PATTERN,
    Accepted,
    Event,
    EventIn,
    EventPage,
    IngestStats,
)
from tenk.ingest.service import IngestService
from tenk.ops.auth import require_reader, require_writer
from tenk.pagination import cursor_codec, keyset_page

router = APIRouter(tags=["ingest"])

_JSON = "application/json"
_FIRST_POSITION = ("-infinity", "00000000-0000-0000-0000-000000000000")
_EVENT_SCHEMA = EventIn.model_json_schema(ref_template="#/components/schemas/{model}")
_ERRORS: dict[int | str, dict[str, Any]] = {
    413: {"description": "Body too large, or more than 1,000 events"},
    422: {"description": "Invalid events: every bad index and field is listed; nothing was accepted"},
    503: {"description": "Backlog above TENK_INGEST_MAX_BACKLOG, or Redis unavailable; see Retry-After"},
}


def _service(request: Request) -> IngestService:
    service: IngestService = request.app.state.ingest
    return service


def _response(outcome: Outcome) -> Response:
    status, body, retry_after = outcome
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(body, status, headers=headers, media_type=_JSON)


def _redis_down() -> Response:
    return error_response(503, "stream_unavailable", "the event stream is unavailable", retry_after_s=1.0)


@router.post(
    "/events",
    status_code=202,
    response_model=Accepted,
    responses=_ERRORS,
    dependencies=[Depends(require_writer)],
    summary="Accept one event; it is written to Postgres shortly after",
    openapi_extra={"requestBody": {"required": True, "content": {_JSON: {"schema": _EVENT_SCHEMA}}}},
)
async def post_event(request: Request) -> Response:
    # Served by the fast lane (tenk.ingest.hot) unless access logging is on; same outcome either way.
    return _response(await accept_one(_service(request), await request.body()))


@router.post(
    "/events/batch",
    status_code=202,
    response_model=Accepted,
    responses=_ERRORS,
    dependencies=[Depends(require_writer)],
    summary=f"Accept up to {MAX_BATCH} events: a JSON array, or NDJSON (application/x-ndjson)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                _JSON: {"schema": {"type": "array", "items": _EVENT_SCHEMA, "minItems": 1, "maxItems": MAX_BATCH}},
                "application/x-ndjson": {"schema": {"type": "string", "description": "One event per line."}},
            },
        }
    },
)
async def post_batch(request: Request) -> Response:
    ndjson = "ndjson" in request.headers.get("content-type", "")
    return _response(await accept_batch(_service(request), await request.body(), ndjson))


@router.get(
    "/events/{event_id}",
    response_model=Event,
    responses={404: {"description": "Not written (yet), or never sent"}},
    dependencies=[Depends(require_reader)],
    summary="One written event",
)
async def get_event(event_id: UUID, request: Request) -> Response:
    row: str | None = await _service(request).pg.fetchval(queries.EVENT_BY_ID, event_id)
    if row is None:
        raise NotFoundError("no such event (it may not be written yet)", field="path.event_id")
    return Response(row.encode(), media_type=_JSON)


@router.get(
    "/sources/{source}/events",
    response_model=EventPage,
    dependencies=[Depends(require_reader)],
    summary="A source's written events by (ts, event_id), keyset paginated",
)
async def source_events(
    request: Request,
    source: Annotated[str, Path(pattern=SOURCE_PATTERN, description="The events' source.")],
    after: Annotated[str | None, Query(max_length=512, description="Cursor from the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response:
    cursors = cursor_codec(request.app.state.settings.cursor_secret, "events")
    position = _FIRST_POSITION
    if after:
        (key,) = cursors.decode(after, shape=(str,))
        ts_text, _, event_id = key.rpartition("|")
        if not ts_text:
            raise InvalidInputError("cursor is not valid", field="query.after")
        position = (ts_text, event_id)
    rows = await _service(request).pg.fetch(queries.SOURCE_PAGE, source, *position, limit + 1)
    return Response(keyset_page(rows, limit, cursors), media_type=_JSON)


@router.get(
    "/ingest/stats",
    response_model=IngestStats,
    dependencies=[Depends(require_reader)],
    summary="Backlog, pending, dead letters, rows written, last flush",
)
async def ingest_stats(request: Request) -> Response:
    service = _service(request)
    try:
        backlog = await service.refresh_backlog()
        totals: dict[bytes, bytes] = await service.redis.hgetall(keys.STATS)  # type: ignore[assignment]
    except REDIS_DOWN:
        return _redis_down()
    dead_letters = await service.pg.fetchval(queries.DEAD_LETTER_COUNT)
    stats = {k.decode(): v.decode() for k, v in totals.items()}
    last_flush = None
    if "last_flush_at_ms" in stats:
        last_flush = {
            "at": datetime.fromtimestamp(int(stats["last_flush_at_ms"]) / 1000, UTC),
            "rows": int(stats.get("last_flush_rows", 0)),
            "ms": float(stats.get("last_flush_ms", 0)),
            "consumer": stats.get("last_flush_consumer", ""),
        }
    body = {
        "backlog": backlog.total,
        "lag": backlog.lag,
        "pending": backlog.pending,
        "stream_length": backlog.stream_length,
        "consumers": backlog.consumers,
        "dead_letters": dead_letters,
        "rows_written": int(stats.get("rows_written", 0)),
        "last_flush": last_flush,
        "max_backlog": service.settings.max_backlog,
        "accepting": not service.over_capacity,
    }
    return Response(orjson.dumps(body), media_type=_JSON)
