"""Validating events and encoding them as stream entries, without a model per event.

A stream entry holds one field, `e`, whose value is the event as one line of Postgres COPY text:

    event_id \t source \t ts \t accepted_us \t payload_json

`ts` is normalised to UTC ISO 8601 and `accepted_us` is when the API accepted it (Unix microseconds).
The only field that can hold a backslash is the payload, and orjson never writes a raw tab, CR or LF,
so the worker turns an entry into a COPY line by doubling backslashes and adding a newline.

An API with tracing on adds a second field, `t`, the accepting span's trace context (`keys.TRACE_FIELD`).
It is not part of the event and not judged here: the worker reads it only to link its write span, and
ignores one that does not parse (`tenk.ingest.tracelinks`).

Whatever the API answers 202 for, the worker writes: both judge fields by the same functions here
(`parse_event` on what a client sent, `entry_problem` on what the stream holds), so an event is never
accepted by one and dead-lettered by the other.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson

from tenk.ingest.schemas import (
    MAX_BATCH,
    MAX_IDEMPOTENCY_KEY,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    SOURCE_PATTERN,
)
from tenk.ingest.writers import ANONYMOUS, scoped_id

_SOURCE = re.compile(SOURCE_PATTERN)
_CANONICAL_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_IDEMPOTENCY_KEY = re.compile(rb"[\x21-\x7e]+")
# A number that a double may not keep as sent: one with 16 or more digits (past a double's 15 exact ones,
# and every integer beyond 64 bits), or with an exponent (the only short way to write a number out of a
# double's range). Anchored where a JSON value starts, so that ids and words in strings ("4e1b") rarely
# send a body down the slow path; a string that does is only checked for nothing.
_LONG_OR_SCALED_NUMBER = re.compile(rb"[:,\[]\s*-?(?:[0-9.]{16}|[0-9.]+[eE])")
# orjson keeps integers in [-2**63, 2**64) exact, and jsonb stores them exactly.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
# The milliseconds a UUIDv7 can carry.
_UUID7_MS_LIMIT = 1 << 48


def uuid7(ms: int | None = None) -> str:
    """A time-ordered UUID (RFC 9562 v7) whose time is `ms` (Unix milliseconds), or now.

    An event's generated id carries the event's own `ts`, not the time it was accepted: the id then
    names the day partition that holds the event, so finding it by id reads that one partition
    (migration 0009). Ids of one day's events stay ordered, at the right edge of that partition's index."""
    if ms is None or not 0 <= ms < _UUID7_MS_LIMIT:
        ms = time.time_ns() // 1_000_000
    # From the OS's CSPRNG, not `random`: a writer who sees a batch's ids could recover a Mersenne Twister's
    # state from them and post conflicting events under the ids to come. That is worth a syscall an id.
    rand = int.from_bytes(os.urandom(10))
    value = ((ms & 0xFFFF_FFFF_FFFF) << 80) | (0x7 << 76) | ((rand >> 62 & 0xFFF) << 64) | (0b10 << 62)
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _epoch_ms(canonical: str) -> int:
    """Unix milliseconds of a `canonical_ts` text (UTC ISO 8601)."""
    # In integers: a float product can land a millisecond short of midnight, on the day before.
    return (datetime.fromisoformat(canonical) - _EPOCH) // _MILLISECOND


def keyed_id(key: bytes, index: int, source: bytes, ts: bytes, payload_json: bytes, writer: bytes = ANONYMOUS) -> str:
    """The id of the `index`-th event of a request sent with this Idempotency-Key (RFC 9562 v8).

    A retry of the request (same key, same events) gets the ids of the first attempt, so Postgres keeps
    one row each. The event's content is part of the hash: two clients that happen to pick the same key
    for different events get different ids, not a conflict. So is the writer (`tenk.ingest.writers`):
    another writer key sending the same events under the same Idempotency-Key gets ids of its own, so
    neither's events are taken for the other's duplicates.
    """
    parts: tuple[bytes, ...] = (b"tenk-idempotency", key, b"%d" % index, source, ts, payload_json)
    if writer != ANONYMOUS:
        parts = (b"tenk-idempotency", writer, *parts[1:])
    digest = hashlib.sha256(b"\0".join(parts)).digest()
    value = int.from_bytes(digest[:16]) & ~(0xF << 76) & ~(0b11 << 62)
    h = f"{value | (0x8 << 76) | (0b10 << 62):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def accepted_now() -> bytes:
    return str(time.time_ns() // 1000).encode()


def valid_idempotency_key(key: bytes) -> bool:
    return 0 < len(key) <= MAX_IDEMPOTENCY_KEY and _IDEMPOTENCY_KEY.fullmatch(key) is not None


# The rules for each field, shared by the API (on what a client sent) and the worker (on an entry):
# whatever the API accepts, the worker writes. Each returns None when the value is acceptable.


def source_problem(source: object) -> str | None:
    # fullmatch: a `$`-anchored `match` would accept a trailing newline, which no COPY line survives.
    if isinstance(source, str) and _SOURCE.fullmatch(source) is not None:
        return None
    return "must be 1-64 of A-Z a-z 0-9 . _ : -, starting with a letter or digit"


def ts_too_old(ts_text: str, not_before: datetime) -> str | None:
    """With retention on, an event older than its window would be written and then dropped by the next
    partition maintenance: a 202 that vanishes. `ts_text` is `canonical_ts`'s."""
    if datetime.fromisoformat(ts_text) < not_before:
        return f"is older than the retention window (before {not_before.isoformat()}); it would be deleted"
    return None


def canonical_ts(ts: object) -> tuple[str, str | None]:
    """(UTC ISO 8601 text, None), or ("", problem). A timestamp without an offset is refused, not
    guessed: the same wall-clock time means different instants on different senders."""
    if not isinstance(ts, str) or len(ts) > 64:
        return "", "must be an RFC 3339 timestamp"
    try:
        parsed = datetime.fromisoformat(ts)
        if parsed.tzinfo is None:
            return "", "must include a UTC offset"
        return parsed.astimezone(UTC).isoformat(), None
    except (ValueError, OverflowError):
        return "", "must be an RFC 3339 timestamp"


def payload_problem(payload_json: bytes) -> str | None:
    """Checks an encoded payload: what orjson wrote for the API, what an entry holds for the worker."""
    if len(payload_json) > MAX_PAYLOAD_BYTES:
        return f"must be at most {MAX_PAYLOAD_BYTES} bytes"
    # Only a JSON object starts and ends with braces; Postgres checks the JSON in between.
    if payload_json[:1] != b"{" or payload_json[-1:] != b"}":
        return "must be a JSON object"
    if b"\\u0000" in payload_json and _NUL_ESCAPE.search(payload_json):
        return "must not contain the NUL character"
    return None


def _encode_payload(payload: object) -> tuple[bytes, str | None]:
    if not isinstance(payload, dict):
        return b"", "must be a JSON object"
    try:
        payload_json = orjson.dumps(payload)
    except orjson.JSONEncodeError:
        # orjson writes at most 255 levels; it reads up to 1,024.
        return b"", f"must be nested at most {MAX_PAYLOAD_DEPTH} levels deep"
    return payload_json, payload_problem(payload_json)


def parse_event(
    event: Any,
    where: str,
    accepted: bytes,
    problems: list[Problem],
    key: bytes | None = None,
    index: int = 0,
    not_before: datetime | None = None,
    writer: bytes = ANONYMOUS,
) -> tuple[bytes, str] | None:
    """(entry, event_id) for a valid event; otherwise appends to `problems` and returns None.

    A client's `event_id` is stored as `writers.scoped_id` makes it for `writer`: the returned id is the
    stored one.

    With `not_before` (retention on), an event whose `ts` is earlier is refused (`ts_too_old`).

    An event without an id gets a time-ordered one, or, when the request carries an Idempotency-Key,
    the one `keyed_id` derives from the key, the event's position in the request and its content.
    """
    if not isinstance(event, dict):
        problems.append({"field": where, "message": "must be a JSON object"})
        return None
    found = len(problems)
    for name in event.keys() - _FIELDS:
        problems.append({"field": f"{where}.{name}", "message": "unknown field"})

    raw_id = event.get("event_id")
    event_id = ""
    if raw_id is None:
        # Generated (from the ts) or keyed (from the content) once the fields are known to be valid.
        pass
    elif isinstance(raw_id, str) and len(raw_id) <= 64:
        try:
            event_id = scoped_id(writer, UUID(raw_id))
        except ValueError:
            problems.append({"field": f"{where}.event_id", "message": "must be a UUID"})
    else:
        problems.append({"field": f"{where}.event_id", "message": "must be a UUID"})

    source = event.get("source")
    problem = source_problem(source)
    if problem is not None:
        problems.append({"field": f"{where}.source", "message": problem})

    ts_text, problem = canonical_ts(event.get("ts"))
    if problem is None and not_before is not None:
        problem = ts_too_old(ts_text, not_before)
    if problem is not None:
        problems.append({"field": f"{where}.ts", "message": problem})

    payload_json, problem = _encode_payload(event.get("payload"))
    if problem is not None:
        problems.append({"field": f"{where}.payload", "message": problem})

    if len(problems) > found:
        return None
    assert isinstance(source, str)
    source_bytes, ts_bytes = source.encode(), ts_text.encode()
    if not event_id:
        event_id = (
            uuid7(_epoch_ms(ts_text))
            if key is None
            else keyed_id(key, index, source_bytes, ts_bytes, payload_json, writer)
        )
    entry = b"\t".join((event_id.encode(), source_bytes, ts_bytes, accepted, payload_json))
    return entry, event_id


# An entry exactly as `parse_event` writes one, checked by one regular expression: id, source, canonical
# UTC ts (a date the calendar has, hours 00-23, so that no leap of `fromisoformat` across versions can widen
# it, no zero fraction, which `isoformat` never writes), accepted time, and a payload in braces with no
# tab, CR or LF. What it passes is acceptable by every rule of `_entry_problem_by_field` but two, checked
# apart: the payload's size, and a NUL escape. Anything else is judged there, field by field. The one
# date a pattern cannot judge is February 29th: its year is checked when group 1 holds it.
_CANONICAL_ENTRY = re.compile(
    rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\t"
    rb"[A-Za-z0-9][A-Za-z0-9._:\-]{0,63}\t"
    rb"(?!0000)[0-9]{4}-"
    rb"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31|(02-29))"
    rb"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.(?!000000)[0-9]{6})?\+00:00\t"
    rb"[0-9]{1,18}\t\{[^\t\n\r]*\}"
)


def _is_canonical_entry(entry: bytes) -> bool:
    match = _CANONICAL_ENTRY.fullmatch(entry)
    if match is None or entry.find(b"\\u0000") != -1:  # maybe a NUL: `payload_problem` tells
        return False
    # The payload is the entry's tail, after its last tab: only a long entry can hold one too large.
    if len(entry) > MAX_PAYLOAD_BYTES and len(entry) - entry.rfind(b"\t") - 1 > MAX_PAYLOAD_BYTES:
        return False
    if match.lastindex == 1:
        february = match.start(1)
        year = int(entry[february - 5 : february - 1])
        return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return True


def entry_problem(entry: bytes) -> str | None:
    """Why the worker must not write an entry, by the same rules the API applied; None if it may.

    Only a producer that skipped `parse_event` can make one fail. Every entry is checked, so the common
    case is one regular expression and one search (`_is_canonical_entry`): the rules field by field
    (a `canonical_ts` round trip, `in` on bytes, which raises and clears a TypeError inside CPython
    before it searches) cost about half of the worker's CPU a row.
    """
    if _is_canonical_entry(entry):
        return None
    return _entry_problem_by_field(entry)


def _entry_problem_by_field(entry: bytes) -> str | None:
    fields = entry.split(b"\t")
    if len(fields) != ENTRY_FIELDS or b"\n" in entry or b"\r" in entry:
        return "malformed entry"
    raw_id, raw_source, raw_ts, accepted, payload_json = fields
    if _CANONICAL_UUID.fullmatch(raw_id) is None:
        return "malformed entry: event_id"
    try:
        source, ts = raw_source.decode("ascii"), raw_ts.decode("ascii")
    except UnicodeDecodeError:
        return "malformed entry: source or ts"
    if source_problem(source) is not None:
        return "malformed entry: source"
    if canonical_ts(ts) != (ts, None):
        return "malformed entry: ts"
    if not (0 < len(accepted) <= 18 and accepted.isdigit()):
        return "malformed entry: accepted time"
    problem = payload_problem(payload_json)
    return None if problem is None else f"malformed entry: payload {problem}"


_MS_A_DAY = 86_400_000
_EPOCH_ORDINAL = datetime(1970, 1, 1).toordinal()


def shared_day(entries: list[bytes]) -> datetime | None:
    """The UTC day (its midnight) on which every entry's ts and its id fall, when every id is a UUIDv7 and
    no id repeats; None when any of that does not hold. The writer's cheapest flushes rely on all of it
    (`queries.STORED_ON_DAY`, `queries.INSERT_FROM_STAGING_SHARED_DAY`).

    Only for entries that `entry_problem` passed, as the worker's are: their ids are canonical and their
    ts a canonical UTC time, whose date is its UTC day, so neither needs checking again here."""
    ids = {entry[:36] for entry in entries}
    # A v7 id's 15th character is its version, and its first 48 bits its milliseconds (`uuid7`).
    if not ids or len(ids) != len(entries) or {event_id[14:15] for event_id in ids} != {b"7"}:
        return None
    id_days = {int(ms[:8] + ms[9:], 16) // _MS_A_DAY for ms in {event_id[:13] for event_id in ids}}
    try:
        dates = {entry[(ts := entry.index(b"\t", 37) + 1) : ts + 10] for entry in entries}
        ts_days = {datetime.fromisoformat(date.decode()).toordinal() - _EPOCH_ORDINAL for date in dates}
    except ValueError:  # not an entry `entry_problem` passed: no day is vouched for
        return None
    if len(id_days) != 1 or ts_days != id_days:
        return None
    return _EPOCH + timedelta(days=id_days.pop())


def _int_in_range(text: str) -> int:
    # Checked before int(): a 5,000-digit literal must not cost (or hit) Python's digit limit.
    if len(text.lstrip("-")) > 20 or not _INT_MIN <= int(text) <= _INT_MAX:
        raise _IntegerOutOfRange
    return int(text)


def _float_kept(text: str) -> float:
    """The stdlib's `parse_float`: refuses a number that would not be stored as the client wrote it.

    The payload is re-encoded by orjson through a double, and jsonb stores that decimal exactly: so a
    literal is kept when orjson's rendering of its double is the same number (`0.1`, `1E+5`), and not
    when the double rounded it (`0.12345678901234567890`) or underflowed (`1e-400` would become `0.0`).
    """
    if len(text) <= 16 and "e" not in text and "E" not in text:
        return 0.0  # at most 15 digits: a double keeps every such decimal, and orjson writes it back
    written = orjson.dumps(orjson.loads(text))
    if Decimal(text) != Decimal(written.decode()):
        raise _NumberNotKept
    return 0.0


class _IntegerOutOfRange(Exception):
    pass


class _NumberNotKept(Exception):
    pass


def _numbers_problem(raw: bytes) -> str | None:
    """orjson reads an integer beyond 64 bits, and any number, as the nearest double: refuse a number it
    would change rather than store another one. Only a body with a long or scaled number can hold one
    (`_LONG_OR_SCALED_NUMBER`), so others skip the slow check."""
    if _LONG_OR_SCALED_NUMBER.search(raw) is None:
        return None
    try:
        json.loads(raw, parse_int=_int_in_range, parse_float=_float_kept)
    except _IntegerOutOfRange:
        return "holds an integer outside the 64-bit range; send it as a string"
    except _NumberNotKept:
        return (
            "holds a number a 64-bit float cannot keep exactly (too many digits, or out of range); send it as a string"
        )
    except (ValueError, RecursionError):
        # orjson accepted it, so only the stdlib's own limits differ: no number was changed.
        return None
    return None


def parse_one(
    body: bytes, key: bytes | None = None, not_before: datetime | None = None, writer: bytes = ANONYMOUS
) -> tuple[bytes, str]:
    try:
        event = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise EventErrors([{"field": "body", "message": "is not valid JSON"}]) from None
    problem = _numbers_problem(body)
    if problem is not None:
        raise EventErrors([{"field": "body", "message": problem}])
    problems: list[Problem] = []
    parsed = parse_event(event, "body", accepted_now(), problems, key, not_before=not_before, writer=writer)
    if parsed is None:
        raise EventErrors(problems)
    return parsed


class TooManyEvents(Exception):
    pass


def parse_batch(
    body: bytes,
    ndjson: bool,
    key: bytes | None = None,
    not_before: datetime | None = None,
    writer: bytes = ANONYMOUS,
) -> tuple[list[bytes], list[str]]:
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
                continue
            problem = _numbers_problem(line)
            if problem is not None:
                bad.append({"field": f"body[{index}]", "message": problem})
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
        problem = _numbers_problem(body)
        if problem is not None:
            raise EventErrors([{"field": "body", "message": problem}])
        events = loaded
    if not events:
        raise EventErrors([{"field": "body", "message": "must hold at least one event"}])
    accepted = accepted_now()
    problems: list[Problem] = []
    entries: list[bytes] = []
    ids: list[str] = []
    for index, event in enumerate(events):
        parsed = parse_event(event, f"body[{index}]", accepted, problems, key, index, not_before, writer)
        if parsed is not None:
            entries.append(parsed[0])
            ids.append(parsed[1])
    if problems:
        raise EventErrors(problems)
    return entries, ids


def copy_line(stream_id: bytes, entry: bytes) -> bytes:
    """The staging row of an entry: its stream id (to dead-letter a conflict by), then its fields."""
    return stream_id + b"\t" + entry.replace(b"\\", b"\\\\") + b"\n"


# The last whole second whose every microsecond is below 2**53: the staged flush computes the accepted time
# as `accepted_us * interval '1 microsecond'`, in a double, exact only below 2**53 (the year 2255).
_LAST_EXACT_SECOND = (2**53 - 1_000_000) // 1_000_000


def event_rows(entries: Iterable[bytes]) -> bytes | None:
    """The COPY text of `events` rows (`queries.EVENT_COLUMNS`) for entries that `entry_problem` passed:
    each entry's fields, its accepted time written as a timestamp. None when an accepted time lies past
    the year 2255, which only a producer that skipped the API can write: the staged flush takes those,
    so that both flushes store the same time for it. The events of one request share their accepted
    time, so each second is formatted once a batch."""
    stamps: dict[bytes, bytes] = {}
    seconds: dict[bytes, bytes] = {}
    parts: list[bytes] = []
    append = parts.append
    for entry in entries:
        # Exactly four tabs (`entry_problem`), none in the payload: the last two bound the accepted time.
        payload_tab = entry.rfind(b"\t")
        accepted_tab = entry.rfind(b"\t", 0, payload_tab)
        accepted = entry[accepted_tab + 1 : payload_tab]
        stamp = stamps.get(accepted)
        if stamp is None:
            padded = accepted.rjust(7, b"0")
            whole = padded[:-6]
            second = seconds.get(whole)
            if second is None:
                if int(whole) > _LAST_EXACT_SECOND:
                    return None
                second = seconds[whole] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(whole))).encode()
            stamp = stamps[accepted] = b"%b.%b+00" % (second, padded[-6:])
        append(entry[: accepted_tab + 1])
        append(stamp)
        # Only the payload can hold a backslash, which COPY's text format doubles.
        append(entry[payload_tab:].replace(b"\\", b"\\\\"))
        append(b"\n")
    return b"".join(parts)


def entry_event_id(entry: bytes) -> str:
    """The event id as written in an entry, for dead letters (it may be anything in a malformed one)."""
    return entry.split(b"\t", 1)[0][:64].decode(errors="replace").replace("\x00", "")
