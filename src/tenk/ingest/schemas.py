"""The event as documented in OpenAPI. The hot path validates with `codec.parse_event`, which enforces
exactly these rules without building a model per event."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

MAX_PAYLOAD_BYTES = 16 * 1024
MAX_BATCH = 1000
# orjson writes payloads nested at most this deep (it reads deeper ones).
MAX_PAYLOAD_DEPTH = 254
MAX_IDEMPOTENCY_KEY = 255
SOURCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,63}$"


class EventIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event_id: UUID | None = Field(
        None,
        description="Client-chosen id: the same event sent again is stored once (the safe retry); another"
        " event under a stored id is a conflict, dead-lettered. Generated when absent (from the"
        " Idempotency-Key when the request has one).",
    )
    source: str = Field(pattern=SOURCE_PATTERN, description="Who sent it: 1-64 of A-Z a-z 0-9 . _ : -")
    ts: AwareDatetime = Field(description="When it happened, RFC 3339 with a UTC offset (naive times are refused).")
    payload: dict[str, Any] = Field(
        description=f"Any JSON object of at most {MAX_PAYLOAD_BYTES} bytes, nested at most {MAX_PAYLOAD_DEPTH}"
        " levels deep, its integers within 64 bits."
    )


class Accepted(BaseModel):
    accepted: int = Field(description="Events added to the stream.")
    ids: list[UUID] = Field(description="Their event ids, in request order.")


class Event(BaseModel):
    event_id: UUID
    source: str
    ts: datetime
    payload: dict[str, Any]
    accepted_at: datetime
    written_at: datetime


class EventPage(BaseModel):
    items: list[Event]
    next: str | None = Field(None, description="Pass as `after` for the next page; null on the last page.")


class LastFlush(BaseModel):
    at: datetime
    rows: int
    ms: float
    consumer: str


class IngestStats(BaseModel):
    backlog: int = Field(description="Events not yet written: lag + pending.")
    lag: int = Field(description="Events in the stream not yet delivered to any worker.")
    pending: int = Field(description="Events delivered to a worker and not yet acknowledged.")
    stream_length: int
    consumers: int
    dead_letters: int
    rows_written: int
    conflicts: int = Field(description="Events whose id was already stored with other content (dead-lettered).")
    vanished: int = Field(description="Pending entries deleted from the stream before they were written.")
    reconciled: int = Field(description="Times a worker found the backlog counters off and reset them.")
    backlog_bytes: int = Field(description="Encoded bytes of the backlog.")
    last_flush: LastFlush | None
    max_backlog: int
    max_backlog_bytes: int
    accepting: bool
