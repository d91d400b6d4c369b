"""Ingest SQL. The worker's connection has no custom codecs: every value crosses as text."""

from __future__ import annotations

# Once per worker connection. ON COMMIT DELETE ROWS empties it at every commit, so a flush never sees
# the previous one's rows, and a rolled-back flush leaves nothing behind either.
CREATE_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS ingest_staging (
    event_id    uuid,
    source      text,
    ts          timestamptz,
    accepted_us bigint,
    payload     jsonb
) ON COMMIT DELETE ROWS
"""
STAGING_TABLE = "ingest_staging"
STAGING_COLUMNS = ["event_id", "source", "ts", "accepted_us", "payload"]

# Duplicates (a redelivered entry, a client that sent an id twice) are skipped, never an error:
# one repeated id must not sink the rest of the batch.
INSERT_FROM_STAGING = """
INSERT INTO events (event_id, source, ts, payload, accepted_at)
SELECT event_id, source, ts, payload, 'epoch'::timestamptz + accepted_us * interval '1 microsecond'
FROM ingest_staging
ON CONFLICT (event_id) DO NOTHING
"""

INSERT_ONE = """
INSERT INTO events (event_id, source, ts, payload, accepted_at)
VALUES ($1::text::uuid, $2::text, $3::text::timestamptz, $4::text::jsonb,
        'epoch'::timestamptz + $5::text::bigint * interval '1 microsecond')
ON CONFLICT (event_id) DO NOTHING
"""

INSERT_DEAD_LETTER = """
INSERT INTO ingest_dead_letters (stream_id, event_id, reason, entry, deliveries)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (stream_id) DO NOTHING
"""

_EVENT_JSON = """json_build_object(
    'event_id', event_id, 'source', source, 'ts', ts, 'payload', payload,
    'accepted_at', accepted_at, 'written_at', written_at)::text"""

EVENT_BY_ID = f"SELECT {_EVENT_JSON} FROM events WHERE event_id = $1"

# Keyset on (ts, event_id), which the (source, ts, event_id) index serves in order. The cursor
# position travels as text: `ts::text|event_id`, exact to the microsecond in the UTC session zone.
SOURCE_PAGE = f"""
SELECT ts::text || '|' || event_id::text, {_EVENT_JSON}
FROM events
WHERE source = $1 AND (ts, event_id) > ($2::text::timestamptz, $3::text::uuid)
ORDER BY ts, event_id
LIMIT $4
"""

DEAD_LETTER_COUNT = "SELECT count(*) FROM ingest_dead_letters"
