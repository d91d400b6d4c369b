-- Finding an event by its id reads one or two day partitions, not all of them. `events` is partitioned by
-- the day of `ts`, and its unique key has to be (event_id, ts); an id reused under another ts can be in
-- any partition. Probing them all cost the writer one index probe per partition per row, forever with
-- retention off: 152 us of Postgres CPU a row at 400 partitions, against 6 for the insert itself.
--
-- So an id names the day it lives on: a UUIDv7 carries a millisecond time, and tenk generates an event's
-- id with its `ts` as that time (`tenk.ingest.codec.uuid7`). An event whose id does not name its day (a
-- client's UUIDv4, an Idempotency-Key's v8, a v7 made at another time) is also listed in
-- `events_elsewhere`, with its ts. Every stored event is then in the partition of its id's day, or listed
-- there: a lookup reads the partition of the id's day, the partition of the ts it is given (the writer's
-- check), and one index of `events_elsewhere`.

-- The UTC midnight that starts the day of `at`.
CREATE FUNCTION tenk_day_start(at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN date_trunc('day', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';

-- The UTC midnight that starts the day a UUIDv7 names (its first 48 bits, Unix milliseconds); NULL for
-- any other version.
CREATE FUNCTION tenk_id_day_start(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN substr(id::text, 15, 1) = '7' THEN
    tenk_day_start(to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0))
END;

-- Events whose id does not name the day of their ts. Kept with `events`: the same transaction adds a row to
-- both, and retention deletes what it drops (`tenk.ingest.partitions`).
CREATE TABLE events_elsewhere (
    event_id uuid        PRIMARY KEY,
    ts       timestamptz NOT NULL
);
CREATE INDEX events_elsewhere_ts_idx ON events_elsewhere (ts);

-- The events stored before this migration: ids generated at accept time, and clients' ids. Where one id
-- was stored twice (the race the writer used to allow), the first written is listed.
INSERT INTO events_elsewhere (event_id, ts)
SELECT DISTINCT ON (event_id) event_id, ts
FROM events
WHERE tenk_id_day_start(event_id) IS DISTINCT FROM tenk_day_start(ts)
ORDER BY event_id, written_at;

-- The stored events with this id that a lookup must see: in the partition of the day of `at` (the ts the
-- writer is about to store, or the id's own day for a read by id), in the partition of the id's day, or
-- listed in events_elsewhere. Inlined by the planner, so each branch reads one partition (pruned at run
-- time) or one index. A row may come back twice; callers test existence, or take one.
CREATE FUNCTION tenk_events_with_id(id uuid, at timestamptz) RETURNS SETOF events
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT * FROM events e
    WHERE e.event_id = id AND e.ts >= tenk_day_start(at) AND e.ts < tenk_day_start(at) + interval '24 hours'
    UNION ALL
    SELECT * FROM events e
    WHERE e.event_id = id AND tenk_id_day_start(id) IS DISTINCT FROM tenk_day_start(at)
      AND e.ts >= tenk_id_day_start(id) AND e.ts < tenk_id_day_start(id) + interval '24 hours'
    UNION ALL
    SELECT e.* FROM events_elsewhere r JOIN events e ON e.event_id = r.event_id AND e.ts = r.ts
    WHERE r.event_id = id
$$;
