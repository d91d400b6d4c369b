from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

import orjson
from fastapi import APIRouter, Depends, Path, Query

from tenk.ingest import keys, queries
from tenk.ingest.accept import accept_batch, accept_one
from tenk.ingest.schemas import (
    MAX_BATCH,
    MAX_IDEMPOTENCY_KEY,
    SOURCE_PATTERN,
    Accepted,
    Event,
    EventIn,
    EventPage,
    IngestStats,
)
from tenk.ingest.service import IngestService
from tenk.ingest.stream import summed_counters
from tenk.ingest.writers import scoped_id, writer_of
from tenk.platform import (
    REDIS_DOWN,
    ContentType,
    CursorCodec,
    IdempotencyKey,
    InvalidInputError,
    NotFoundError,
    RawBody,
    Reply,
    ReplyRoute,
    app_state,
    cursors,
    error_reply,
    errors_documented,
    header,
    hot,
    keyset_page,
    require_event_reader,
    require_writer,
    resolved,
)

router = APIRouter(tags=["ingest"], route_class=ReplyRoute)

_JSON = "application/json"
_FIRST_POSITION = ("-infinity", "00000000-0000-0000-0000-000000000000")
_EVENT_SCHEMA = EventIn.model_json_schema(ref_template="#/components/schemas/{model}")
_ERRORS = errors_documented(
    {
        413: "Body too large, or more than 1,000 events",
        422: "Invalid events: every bad index and field is listed; nothing was accepted",
        503: "Backlog above TENK_INGEST_MAX_BACKLOG(_BYTES), or Redis unavailable; see Retry-After."
        " The events may have been added all the same: retry with the same event_ids or Idempotency-Key.",
    }
)
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Generated ids derive from it and each event's position: a retry gets the same ids, stored once.",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY, "pattern": "^[!-~]+$"},
}
IngestDep = Annotated[IngestService, app_state("ingest")]
# The request's writer (`tenk.ingest.writers`): whose ids the client's are, on a write or a read by id.
Writer = Annotated[
    bytes, resolved(lambda state, scope: writer_of(bool(state.settings.api_keys), header(scope, b"authorization")))
]
EventCursors = Annotated[CursorCodec, cursors("events")]


def _redis_down() -> Reply:
    return error_reply(503, "stream_unavailable", "the event stream is unavailable", retry_after_s=1.0)


@router.post(
    "/events",
    status_code=202,
    response_model=Accepted,
    responses=_ERRORS,
    dependencies=[Depends(require_writer)],
    summary="Accept one event; it is written to Postgres shortly after",
    openapi_extra={
        "parameters": [_IDEMPOTENCY_KEY],
        "requestBody": {"required": True, "content": {_JSON: {"schema": _EVENT_SCHEMA}}},
    },
)
@hot
async def post_event(ingest: IngestDep, body: RawBody, idempotency_key: IdempotencyKey, writer: Writer) -> Reply:
    return await accept_one(ingest, body, idempotency_key, writer)


@router.post(
    "/events/batch",
    status_code=202,
    response_model=Accepted,
    responses=_ERRORS,
    dependencies=[Depends(require_writer)],
    summary=f"Accept up to {MAX_BATCH} events: a JSON array, or NDJSON (application/x-ndjson)",
    openapi_extra={
        "parameters": [_IDEMPOTENCY_KEY],
        "requestBody": {
            "required": True,
            "content": {
                _JSON: {"schema": {"type": "array", "items": _EVENT_SCHEMA, "minItems": 1, "maxItems": MAX_BATCH}},
                "application/x-ndjson": {"schema": {"type": "string", "description": "One event per line."}},
            },
        },
    },
)
@hot
async def post_batch(
    ingest: IngestDep, body: RawBody, content_type: ContentType, idempotency_key: IdempotencyKey, writer: Writer
) -> Reply:
    return await accept_batch(ingest, body, b"ndjson" in content_type, idempotency_key, writer)


@router.get(
    "/events/{event_id}",
    response_model=Event,
    responses=errors_documented({404: "Not written (yet), or never sent"}),
    dependencies=[Depends(require_event_reader)],
    summary="One written event",
    description="By the id a 202 answered; or, with the key that wrote it, by the event_id its client chose"
    " (stored under an id scoped to that key, see docs/ingest.md).",
)
async def get_event(event_id: UUID, ingest: IngestDep, writer: Writer) -> Reply:
    row: str | None = None
    scoped = scoped_id(writer, event_id)
    if scoped != str(event_id):
        # The reader's own event under the id its client chose comes first; then the id as stored.
        row = await ingest.pg.fetchval(queries.EVENT_BY_ID, UUID(scoped))
    if row is None:
        row = await ingest.pg.fetchval(queries.EVENT_BY_ID, event_id)
    if row is None:
        raise NotFoundError("no such event (it may not be written yet)", field="path.event_id")
    return Reply(200, row.encode())


@router.get(
    "/sources/{source}/events",
    response_model=EventPage,
    dependencies=[Depends(require_event_reader)],
    summary="A source's written events by (ts, event_id), keyset paginated",
)
@hot
async def source_events(
    ingest: IngestDep,
    codec: EventCursors,
    source: Annotated[str, Path(pattern=SOURCE_PATTERN, description="The events' source.")],
    after: Annotated[str | None, Query(max_length=512, description="Cursor from the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Reply:
    position = _position(codec, after) if after else _FIRST_POSITION
    rows = await ingest.pg.fetch(queries.SOURCE_PAGE, source, *position, limit + 1)
    return Reply(200, keyset_page(rows, limit, codec))


def _position(codec: CursorCodec, after: str) -> tuple[str, str]:
    """(ts, event_id) from a cursor, both re-rendered by Python, so Postgres never parses text we did not check."""
    (key,) = codec.decode(after, shape=(str,))
    ts_text, _, event_id = key.rpartition("|")
    try:
        ts = datetime.fromisoformat(ts_text)
        if ts.tzinfo is None:
            raise ValueError("a cursor's timestamp has an offset")
        # In UTC, so that no offset Python accepts and Postgres does not (beyond +-15:59) can reach it.
        return ts.astimezone(UTC).isoformat(), str(UUID(event_id))
    except (ValueError, OverflowError):
        raise InvalidInputError("cursor is not valid", field="query.after") from None


@router.get(
    "/ingest/stats",
    response_model=IngestStats,
    dependencies=[Depends(require_event_reader)],
    summary="Backlog, pending, dead letters, rows written, last flush",
)
async def ingest_stats(service: IngestDep) -> Reply:
    try:
        backlog = await service.refresh_backlog()
        totals: dict[bytes, bytes] = await service.redis.hgetall(keys.STATS)  # type: ignore[assignment]
        per_shard = await summed_counters(service.redis, service.shards_seen, ["vanished", "reconciled"])
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
        "conflicts": int(stats.get("conflicts", 0)),
        "vanished": per_shard["vanished"],
        "reconciled": per_shard["reconciled"],
        "backlog_bytes": backlog.bytes,
        "last_flush": last_flush,
        "max_backlog": service.settings.max_backlog,
        "max_backlog_bytes": service.settings.max_backlog_bytes,
        "accepting": not service.over_capacity,
    }
    return Reply(200, orjson.dumps(body))
