"""What POST /events and /events/batch do, shared by the FastAPI routes and the fast lane (`hot.py`).

Each returns (status, JSON body, Retry-After seconds or None), so neither caller builds more than it sends.
"""

from __future__ import annotations

import orjson

from tenk.connections import REDIS_DOWN
from tenk.errors import error_body
from tenk.ingest import codec
from tenk.ingest.schemas import MAX_BATCH
from tenk.ingest.service import IngestService

Outcome = tuple[int, bytes, int | None]

_TOO_MANY = error_body("payload_too_large", f"a batch holds at most {MAX_BATCH} events")
_STREAM_DOWN = error_body("stream_unavailable", "the event stream is unavailable")


def _invalid(exc: codec.EventErrors) -> Outcome:
    return 422, error_body("invalid_input", "the events are not valid; nothing was accepted", exc.problems), None


def _busy(service: IngestService) -> Outcome:
    backlog = service.backlog.total if service.backlog is not None else 0
    message = f"{backlog} events wait to be written (cap {service.settings.max_backlog}); retry later"
    return 503, error_body("backlog_full", message), 1


async def accept_one(service: IngestService, body: bytes) -> Outcome:
    if service.over_capacity:
        return _busy(service)
    try:
        entry, event_id = codec.parse_one(body)
    except codec.EventErrors as exc:
        return _invalid(exc)
    try:
        await service.producer.add([entry])
    except REDIS_DOWN:
        return 503, _STREAM_DOWN, 1
    return 202, b'{"accepted":1,"ids":["' + event_id.encode() + b'"]}', None


async def accept_batch(service: IngestService, body: bytes, ndjson: bool) -> Outcome:
    if service.over_capacity:
        return _busy(service)
    try:
        entries, ids = codec.parse_batch(body, ndjson)
    except codec.TooManyEvents:
        return 413, _TOO_MANY, None
    except codec.EventErrors as exc:
        return _invalid(exc)
    try:
        await service.producer.add(entries)
    except REDIS_DOWN:
        return 503, _STREAM_DOWN, 1
    return 202, orjson.dumps({"accepted": len(ids), "ids": ids}), None
