-- Events written by the ingest worker (and, directly, by the lab's baselines).
CREATE TABLE events (
    event_id    uuid        PRIMARY KEY,
    source      text        NOT NULL,
    ts          timestamptz NOT NULL,
    payload     jsonb       NOT NULL,
    -- When the API accepted it (Redis confirmed the XADD), and when it was written here; the gap is
    -- the write-behind lag.
    accepted_at timestamptz NOT NULL DEFAULT now(),
    written_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX events_source_ts_idx ON events (source, ts, event_id);

-- Stream entries that could not be written (bad data, or delivered too often), kept as read.
CREATE TABLE ingest_dead_letters (
    stream_id  text        PRIMARY KEY,
    event_id   text        NOT NULL,
    reason     text        NOT NULL,
    entry      bytea       NOT NULL,
    deliveries integer     NOT NULL,
    dead_at    timestamptz NOT NULL DEFAULT now()
);
