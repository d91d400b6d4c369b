"""Ingest SQL. The worker's connection has no custom codecs: every value crosses as text."""

from __future__ import annotations

# The staging table the COPY fills. `stream_id` names the entry a row came from, so that a conflict can
# be dead-lettered as the entry it was.
_STAGING_COLUMNS_SQL = """(
    stream_id   text,
    event_id    uuid,
    source      text,
    ts          timestamptz,
    accepted_us bigint,
    payload     jsonb
)"""
# Once per connection, straight to Postgres: ON COMMIT DELETE ROWS empties it at every commit, and a
# rolled-back flush leaves nothing in it either. Made per flush, it writes and removes catalog rows each
# time, Postgres CPU every row of a batch shares (6709975's message has the figure).
CREATE_SESSION_STAGING = f"CREATE TEMP TABLE IF NOT EXISTS ingest_staging {_STAGING_COLUMNS_SQL} ON COMMIT DELETE ROWS"
# Through a transaction-mode pooler (PgBouncer), at the start of every flush, inside its transaction:
# ON COMMIT DROP makes the table that transaction's alone, so no state outlives it on the server
# connection, which the pooler may hand to another client next.
CREATE_STAGING = f"CREATE TEMP TABLE ingest_staging {_STAGING_COLUMNS_SQL} ON COMMIT DROP"
STAGING_TABLE = "ingest_staging"
STAGING_COLUMNS = ["stream_id", "event_id", "source", "ts", "accepted_us", "payload"]

# Duplicates (a redelivered entry, a client that sent an id twice) are skipped, never an error:
# one repeated id must not sink the rest of the batch. A skipped row that differs from the stored one
# is a conflict (an id reused for another event), which CONFLICTS_IN_STAGING finds afterwards.
# The table is partitioned by ts (migration 0006), so its unique key is (event_id, ts): ON CONFLICT
# skips the same event again; the probe of `tenk_events_with_id` (migration 0009) skips an id already
# stored under another ts, reading the partition of the row's ts, the partition of its id's day and one
# index of `events_elsewhere`, however many partitions there are; DISTINCT ON keeps the first (in stream
# order) of one id repeated within the batch. An event whose id does not name its day is listed in
# events_elsewhere in the same statement.
# The probe is a LATERAL with LIMIT 1, not NOT EXISTS: the planner turned NOT EXISTS into a hash anti
# join that read every row of `events` into a hash on every flush, so a flush cost grew with the table
# until the probe cost several times the insert (2b9202f's message has the figures). A LATERAL with
# LIMIT cannot be hashed.
# Limit: two *different* events with one id and different ts, flushed at the same instant on two
# connections, can both be stored (neither sees the other's uncommitted row); the same event never is.
# Returns the rows inserted. Two forms: a batch whose every ts and every UUIDv7 id fall on one day (any
# batch of events stamped near their sending, with generated ids) probes that day's partition, named by
# $1, so the planner reads that partition alone; any other batch probes, row by row, the partitions of
# its ts and of its id's day, each pruned at run time. The run-time form is the dearer one: the executor
# starts a scan for every partition before pruning, so its cost grows with the partitions kept
# (3b6d5bf's message has the figures).
_INSERT_PROBING = """
WITH inserted AS (
    INSERT INTO events (event_id, source, ts, payload, accepted_at)
    SELECT DISTINCT ON (event_id)
           event_id, source, ts, payload, 'epoch'::timestamptz + accepted_us * interval '1 microsecond'
    FROM ingest_staging s
    LEFT JOIN LATERAL ({probe} LIMIT 1) AS found ON true
    WHERE found.stored IS NULL
    ORDER BY event_id, length(stream_id), stream_id
    ON CONFLICT (event_id, ts) DO NOTHING
    RETURNING event_id, ts
), listed AS (
    INSERT INTO events_elsewhere (event_id, ts)
    SELECT event_id, ts FROM inserted WHERE tenk_id_day_start(event_id) IS DISTINCT FROM tenk_day_start(ts)
    ON CONFLICT (event_id) DO NOTHING
)
SELECT count(*) FROM inserted
"""
_ONE_DAY_PROBE = """SELECT true AS stored FROM events e
        WHERE e.event_id = s.event_id AND e.ts >= $1::timestamptz AND e.ts < $1::timestamptz + interval '24 hours'
        UNION ALL
        SELECT true FROM events_elsewhere r WHERE r.event_id = s.event_id"""
INSERT_FROM_STAGING = _INSERT_PROBING.format(
    probe="""SELECT true AS stored FROM tenk_events_with_id(s.event_id, s.ts)"""
)
INSERT_FROM_STAGING_ONE_DAY = _INSERT_PROBING.format(probe=_ONE_DAY_PROBE)
# The common flush, when the worker has seen (`codec.shared_day`) that every id is a distinct UUIDv7 and
# every id and ts fall on the one day $1: no id repeats, so DISTINCT ON and its sort have nothing to
# choose; every id names its ts's day, so none goes in events_elsewhere. Its command tag counts the rows
# inserted. One round trip less than STAGING_DAY then INSERT_FROM_STAGING_ONE_DAY, and less Postgres CPU
# a row, COPY included (`python -m benchmarks.flush_cost`: docs/results.md#2026-11-27-flush-cost).
INSERT_FROM_STAGING_SHARED_DAY = f"""
INSERT INTO events (event_id, source, ts, payload, accepted_at)
SELECT event_id, source, ts, payload, 'epoch'::timestamptz + accepted_us * interval '1 microsecond'
FROM ingest_staging s
LEFT JOIN LATERAL ({_ONE_DAY_PROBE} LIMIT 1) AS found ON true
WHERE found.stored IS NULL
ON CONFLICT (event_id, ts) DO NOTHING
"""

# The straight flush (`PostgresWriter`): a batch that `codec.shared_day` vouches for goes by COPY into
# `events` itself, with no staging table and no INSERT..SELECT: less Postgres CPU a row, this question
# included (`python -m benchmarks.flush_cost`: docs/results.md#2026-11-29-flush-cost). COPY cannot
# skip a duplicate, so STORED_ON_DAY asks first, in the same transaction, whether any id is stored on the
# batch's day or listed in events_elsewhere; a duplicate stored after that question (a concurrent flush)
# makes the COPY fail on the primary key instead, and the batch goes the staged way.
EVENT_COLUMNS = ["event_id", "source", "ts", "accepted_at", "payload"]
# $1 the day (as in the probe), $2 the ids as one uuid[] literal: one parameter packs far faster than
# a thousand.
STORED_ON_DAY = f"""
SELECT EXISTS (
    SELECT FROM unnest($2::text::uuid[]) AS s(event_id) CROSS JOIN LATERAL ({_ONE_DAY_PROBE} LIMIT 1) AS found
)
"""

# The one day every staged row's ts and UUIDv7 id fall on, or NULL.
STAGING_DAY = """
SELECT CASE WHEN min(day) = max(day) THEN min(day) END
FROM (
    SELECT tenk_day_start(ts) AS day FROM ingest_staging
    UNION ALL
    SELECT tenk_id_day_start(event_id) FROM ingest_staging WHERE substr(event_id::text, 15, 1) = '7'
) AS days
"""

# Run after INSERT_FROM_STAGING, in the same transaction, only when it skipped rows. A new statement
# sees what a concurrent flush committed with the same ids (the INSERT waited for it), and the rows the
# INSERT itself added, so two different events with one id in the same batch are caught too.
# `accepted_at` is not compared: a client resending the same event is not a conflict.
CONFLICTS_IN_STAGING = """
SELECT DISTINCT s.stream_id
FROM ingest_staging s CROSS JOIN LATERAL tenk_events_with_id(s.event_id, s.ts) AS e
WHERE (s.source, s.ts, s.payload) IS DISTINCT FROM (e.source, e.ts, e.payload)
"""

# INSERT_FROM_STAGING for one event (TENK_INGEST_WRITE_MODE=insert); returns the rows inserted (0 or 1).
INSERT_ONE = """
WITH inserted AS (
    INSERT INTO events (event_id, source, ts, payload, accepted_at)
    SELECT $1::text::uuid, $2::text, $3::text::timestamptz, $4::text::jsonb,
           'epoch'::timestamptz + $5::text::bigint * interval '1 microsecond'
    WHERE NOT EXISTS (SELECT FROM tenk_events_with_id($1::text::uuid, $3::text::timestamptz))
    ON CONFLICT (event_id, ts) DO NOTHING
    RETURNING event_id, ts
), listed AS (
    INSERT INTO events_elsewhere (event_id, ts)
    SELECT event_id, ts FROM inserted WHERE tenk_id_day_start(event_id) IS DISTINCT FROM tenk_day_start(ts)
    ON CONFLICT (event_id) DO NOTHING
)
SELECT count(*) FROM inserted
"""

# After INSERT_ONE skipped a row: whether the stored event differs from the one that was skipped.
CONFLICT_ONE = """
SELECT bool_or((source, ts, payload) IS DISTINCT FROM ($2::text, $3::text::timestamptz, $4::text::jsonb))
FROM tenk_events_with_id($1::text::uuid, $3::text::timestamptz)
"""

INSERT_DEAD_LETTER = """
INSERT INTO ingest_dead_letters (stream_id, event_id, reason, entry, deliveries)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (stream_id) DO NOTHING
"""

_EVENT_JSON = """json_build_object(
    'event_id', event_id, 'source', source, 'ts', ts, 'payload', payload,
    'accepted_at', accepted_at, 'written_at', written_at)::text"""

# The partition of the id's day and one index of events_elsewhere (migration 0009), whatever the number of
# partitions. LIMIT 1: see the limit noted at INSERT_FROM_STAGING; the first stored wins.
EVENT_BY_ID = f"""
SELECT {_EVENT_JSON} FROM tenk_events_with_id($1, tenk_id_day_start($1)) ORDER BY written_at LIMIT 1
"""

# Keyset on (ts, event_id), which the (source, ts, event_id) index serves in order. The cursor
# position travels as text: `ts::text|event_id`, exact to the microsecond in the UTC session zone.
SOURCE_PAGE = f"""
SELECT ts::text || '|' || event_id::text, {_EVENT_JSON}
FROM events
WHERE source = $1 AND (ts, event_id) > ($2::text::timestamptz, $3::text::uuid)
ORDER BY ts, event_id
LIMIT $4
"""

# Kept by triggers (migration 0008): reading it costs one row, however many dead letters there are.
DEAD_LETTER_COUNT = "SELECT kept FROM ingest_dead_letter_count"

# In batches, so that a long backlog of expired letters never holds locks or bloats one transaction.
EXPIRE_DEAD_LETTERS = """
DELETE FROM ingest_dead_letters
WHERE stream_id IN (
    SELECT stream_id FROM ingest_dead_letters WHERE dead_at < now() - $1::int * interval '1 day' LIMIT $2
)
"""
