-- The events table, partitioned by day of the event's `ts` (UTC), so that retention drops whole
-- partitions (TENK_INGEST_RETENTION_DAYS; tenk.ingest.partitions) instead of deleting rows one by one.
-- Daily, not monthly: a day is the unit retention is set in, and at ingest rates a month would be one
-- partition too large to index, vacuum or drop cheaply. The existing rows move over in this migration's
-- transaction: all of them, or (on failure) none.

ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey;
ALTER INDEX events_source_ts_idx RENAME TO events_unpartitioned_source_ts_idx;

-- A unique key of a partitioned table must contain the partition key: (event_id, ts). The same event
-- again (a redelivery, a client's retry) has the same ts and is skipped by ON CONFLICT as before; an
-- id reused with another ts is caught by the writer's NOT EXISTS on event_id (tenk.ingest.queries),
-- which this key's leading event_id serves in every partition.
CREATE TABLE events (
    event_id    uuid        NOT NULL,
    source      text        NOT NULL,
    ts          timestamptz NOT NULL,
    payload     jsonb       NOT NULL,
    accepted_at timestamptz NOT NULL DEFAULT now(),
    written_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (event_id, ts)
) PARTITION BY RANGE (ts);
CREATE INDEX events_source_ts_idx ON events (source, ts, event_id);

-- Events whose day has no partition (a ts far in the past or the future): kept, never refused.
CREATE TABLE events_default PARTITION OF events DEFAULT;

-- The partition `events_YYYYMMDD` for one UTC day, if missing; true when made. Rows of that day waiting
-- in events_default move into it first, in the caller's transaction: the default partition may not
-- hold rows of an attached partition's range.
CREATE FUNCTION tenk_event_partition(day date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    name text := 'events_' || to_char(day, 'YYYYMMDD');
    low  timestamptz := day::timestamp AT TIME ZONE 'UTC';
    high timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE events INCLUDING DEFAULTS)', name);
    EXECUTE format(
        'WITH moved AS (DELETE FROM events_default WHERE ts >= %L AND ts < %L RETURNING *) '
        'INSERT INTO %I SELECT * FROM moved', low, high, name);
    EXECUTE format('ALTER TABLE events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, low, high);
    RETURN true;
END
$$;

-- Partitions for the days the existing rows fall on (within about a year of today; older or stranger
-- ones wait in events_default), and for yesterday to three days ahead, as the worker keeps them.
SELECT tenk_event_partition(day)
FROM (
    SELECT DISTINCT (ts AT TIME ZONE 'UTC')::date AS day
    FROM events_unpartitioned
    WHERE ts >= now() - interval '400 days' AND ts < now() + interval '4 days'
    UNION
    SELECT generate_series(-1, 3) + (now() AT TIME ZONE 'UTC')::date
) AS days;

INSERT INTO events (event_id, source, ts, payload, accepted_at, written_at)
SELECT event_id, source, ts, payload, accepted_at, written_at FROM events_unpartitioned;
DROP TABLE events_unpartitioned;
