"""Validating events and encoding them as stream entries, without a model per event.

A stream entry holds one field, `e`, whose value is the event as one line of Postgres COPY text:

    event_id \t source \t ts \t accepted_us \t payload_json

`ts` is normalised to UTC ISO 8601 and `accepted_us` is when the API accepted it (Unix microseconds).
The only field that can hold a backslash is the payload, and orjson never writes a raw tab, CR or LF,
so the worker turns an entry into a COPY line by doubling backslashes and adding a newline.
"""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import orjson

from tenk.ingest.schemas import MAX_BATCH, MAX_PAYLOAD_BYTES, SOURCE_PATTERN

_SOURCE = re.compile(SOURCE_PATTERN)
_FIELDS = frozenset(("event_id", "source", "ts", "payload"))
# A NUL escape preceded by an even number of backslashes is a real NUL, which jsonb refuses.
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
ENTRY_FIELDS = 5

Problem = dict[str, str]


class EventErrors(Exception):
    """Every problem found in a request body, each naming its field."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(f"{len(problems)} invalid field(s)")
        self.problems = problems


def uuid7() -> str:
    """A time-ordered UUID (RFC 9562 v7): generated ids land at the right edge of the primary key index."""
    ms = time.time_ns() // 1_000_000
    # An id, not a secret: the process's PRNG (reseeded in every forked child) spares a syscall per event.
    rand = random.getrandbits(80)
    value = ((ms & 0xFFFF_FFFF_FFFF) << 80) | (0x7 << 76) | ((rand >> 62 & 0xFFF) << 64) | (0b10 << 62)
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def accepted_now() -> bytes:
    return str(time.time_ns() // 1000).encode()


def parse_event(event: Any, where: str, accepted: bytes, problems: list[Problem]) -> tuple[bytes, str] | None:
    """(entry, event_id) for a valid event; otherwise appends to `problems` and returns None."""
    if not isinstance(event, dict):
        problems.append({"field": where, "message": "must be a JSON object"})
        return None
    found = len(problems)
    for name in event.keys() - _FIELDS:
        problems.append({"field": f"{where}.{name}", "message": "unknown field"})

    raw_id = event.get("event_id")
    event_id = ""
    if raw_id is None:
        event_id = uuid7()
    elif isinstance(raw_id, str) and len(raw_id) <= 64:
        try:
            event_id = str(UUID(raw_id))
        except ValueError:
            problems.append({"field": f"{where}.event_id", "message": "must be a UUID"})
    else:
        problems.append({"field": f"{where}.event_id", "message": "must be a UUID"})

    source = event.get("source")
    if not isinstance(source, str) or _SOURCE.match(source) is None:
        problems.append({"field": f"{where}.source", "message": "must be 1-64 of A-Z a-z 0-9 . _ : -"})

    ts = event.get("ts")
    ts_text = ""
    if not isinstance(ts, str) or len(ts) > 64:
        problems.append({"field": f"{where}.ts", "message": "must be an RFC 3339 timestamp"})
    else:
        try:
            parsed = datetime.fromisoformat(ts)
            if parsed.tzinfo is None:
                problems.append({"field": f"{where}.ts", "message": "must include a UTC offset"})
            else:
                ts_text = parsed.astimezone(UTC).isoformat()
        except (ValueError, OverflowError):
            problems.append({"field": f"{where}.ts", "message": "must be an RFC 3339 timestamp"})

    payload = event.get("payload")
    payload_json = b""
    if not isinstance(payload, dict):
        problems.append({"field": f"{where}.payload", "message": "must be a JSON object"})
    else:
        payload_json = orjson.dumps(payload)
        if len(payload_json) > MAX_PAYLOAD_BYTES:
            problems.append({"field": f"{where}.payload", "message": f"must be at most {MAX_PAYLOAD_BYTES} bytes"})
        elif b"\\u0000" in payload_json and _NUL_ESCAPE.search(payload_json):
            problems.append({"field": f"{where}.payload", "message": "must not contain the NUL character"})

    if len(problems) > found:
        return None
    assert isinstance(source, str)
    entry = b"\t".join((event_id.encode(), source.encode(), ts_text.encode(), accepted, payload_json))
    return entry, event_id


def parse_one(body: bytes) -> tuple[bytes, str]:
    try:
        event = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise EventErrors([{"field": "body", "message": "is not valid JSON"}]) from None
    problems: list[Problem] = []
    parsed = parse_event(event, "body", accepted_now(), problems)
    if parsed is None:
        raise EventErrors(problems)
    return parsed


class TooManyEvents(Exception):
    pass


def parse_batch(body: bytes, ndjson: bool) -> tuple[list[bytes], list[str]]:
    """All events of a batch, or EventErrors listing every bad index and field (nothing is half-accepted)."""
    if ndjson:
        lines = [line for line in body.split(b"\n") if line.strip()]
        if len(lines) > MAX_BATCH:
            raise TooManyEvents
        events: list[Any] = []
        bad: list[Problem] = []
        for index, line in enumerate(lines):
            try:
                events.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                events.append(None)
                bad.append({"field": f"body[{index}]", "message": "is not valid JSON"})
        if bad:
            raise EventErrors(bad)
    else:
        try:
            loaded = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise EventErrors([{"field": "body", "message": "is not valid JSON"}]) from None
        if not isinstance(loaded, list):
            raise EventErrors([{"field": "body", "message": "must be a JSON array of events"}])
        if len(loaded) > MAX_BATCH:
            raise TooManyEvents
        events = loaded
    if not events:
        raise EventErrors([{"field": "body", "message": "must hold at least one event"}])
    accepted = accepted_now()
    problems: list[Problem] = []
    entries: list[bytes] = []
    ids: list[str] = []
    for index, event in enumerate(events):
        parsed = parse_event(event, f"body[{index}]", accepted, problems)
        if parsed is not None:
            entries.append(parsed[0])
            ids.append(parsed[1])
    if problems:
        raise EventErrors(problems)
    return entries, ids


def well_formed(entry: bytes) -> bool:
    """Whether an entry can become exactly one COPY line; Postgres checks the field values themselves."""
    return entry.count(b"\t") == ENTRY_FIELDS - 1 and b"\n" not in entry and b"\r" not in entry


def copy_line(entry: bytes) -> bytes:
    return entry.replace(b"\\", b"\\\\") + b"\n"


def entry_event_id(entry: bytes) -> str:
    """The event id as written in an entry, for dead letters (it may be anything in a malformed one)."""
    return entry.split(b"\t", 1)[0][:64].decode(errors="replace").replace("\x00", "")
