"""What POST /events and /events/batch do; their routes are `@hot`, so both lanes call this.

Each returns a `Reply` (status, JSON body, Retry-After seconds or None), so neither lane builds more than it sends.

A 503 does not say that nothing was added: a timeout can strike after Redis ran the append. A retry is
safe when every event carries its own `event_id`, or when the request carries an `Idempotency-Key`
(the ids generated for it are derived from the key): Postgres keeps one row per id either way.

`writer` is the request's writer (`tenk.ingest.writers`): the ids a client chooses, or derives from an
Idempotency-Key, are its own, so no other key's events can take them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from tenk.ingest import codec
from tenk.ingest.producer import BacklogFull, NotReplicated
from tenk.ingest.schemas import MAX_BATCH, MAX_IDEMPOTENCY_KEY
from tenk.ingest.service import IngestService
from tenk.ingest.writers import ANONYMOUS
from tenk.platform import REDIS_DOWN, Reply, error_body

_TOO_MANY = error_body("payload_too_large", f"a batch holds at most {MAX_BATCH} events")
_STREAM_DOWN = error_body("stream_unavailable", "the event stream is unavailable")
_NOT_REPLICATED = error_body(
    "not_replicated",
    "no Redis replica acknowledged the events in time, so they are not acknowledged; retry (the same ids)",
)
_BAD_KEY = error_body(
    "invalid_input",
    "the Idempotency-Key is not valid",
    [{"field": "header.idempotency-key", "message": f"must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters"}],
)


def _not_before(service: IngestService) -> datetime | None:
    """The oldest `ts` retention keeps: an older event is refused (422 naming `ts`), not answered 202 and
    then deleted by the next partition maintenance. Rolling, so that what is accepted stays until its `ts`
    is `retention_days` old (whole days are dropped, so up to a day longer)."""
    days = service.settings.retention_days
    return datetime.now(UTC) - timedelta(days=days) if days > 0 else None


def _invalid(exc: codec.EventErrors) -> Reply:
    return Reply(422, error_body("invalid_input", "the events are not valid; nothing was accepted", exc.problems), None)


def _busy(service: IngestService) -> Reply:
    backlog = service.backlog
    count, size = (backlog.total, backlog.bytes) if backlog is not None else (0, 0)
    settings = service.settings
    message = (
        f"{count} events ({size} bytes) wait to be written (cap {settings.max_backlog} events,"
        f" {settings.max_backlog_bytes} bytes); retry later"
    )
    return Reply(503, error_body("backlog_full", message), 1)


async def _append(service: IngestService, entries: list[bytes]) -> Reply | None:
    try:
        await service.producer.add(entries)
    except BacklogFull:
        return _busy(service)
    except NotReplicated:
        return Reply(503, _NOT_REPLICATED, 1)
    except REDIS_DOWN:
        return Reply(503, _STREAM_DOWN, 1)
    return None


async def accept_one(
    service: IngestService, body: bytes, idempotency_key: bytes | None = None, writer: bytes = ANONYMOUS
) -> Reply:
    if idempotency_key is not None and not codec.valid_idempotency_key(idempotency_key):
        return Reply(422, _BAD_KEY, None)
    if service.over_capacity:
        return _busy(service)
    try:
        entry, event_id = codec.parse_one(body, idempotency_key, _not_before(service), writer)
    except codec.EventErrors as exc:
        return _invalid(exc)
    if service.full_shards and service.refuses([entry]):
        return _busy(service)
    refused = await _append(service, [entry])
    if refused is not None:
        return refused
    return Reply(202, b'{"accepted":1,"ids":["' + event_id.encode() + b'"]}', None)


async def accept_batch(
    service: IngestService,
    body: bytes,
    ndjson: bool,
    idempotency_key: bytes | None = None,
    writer: bytes = ANONYMOUS,
) -> Reply:
    if idempotency_key is not None and not codec.valid_idempotency_key(idempotency_key):
        return Reply(422, _BAD_KEY, None)
    if service.over_capacity:
        return _busy(service)
    try:
        entries, ids = codec.parse_batch(body, ndjson, idempotency_key, _not_before(service), writer)
    except codec.TooManyEvents:
        return Reply(413, _TOO_MANY, None)
    except codec.EventErrors as exc:
        return _invalid(exc)
    if service.full_shards and service.refuses(entries):
        return _busy(service)
    refused = await _append(service, entries)
    if refused is not None:
        return refused
    return Reply(202, orjson.dumps({"accepted": len(ids), "ids": ids}), None)
