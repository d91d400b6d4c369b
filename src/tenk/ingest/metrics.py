"""The worker's metrics (served by `tenk worker --metrics-port`); the API exports the backlog itself."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

BACKLOG = Gauge("tenk_ingest_backlog", "Events accepted and not yet written, by kind.", ["kind"])
BACKLOG_LAG = BACKLOG.labels("lag")
BACKLOG_PENDING = BACKLOG.labels("pending")
BACKLOG_BYTES = Gauge("tenk_ingest_backlog_bytes", "Encoded bytes of the events accepted and not yet written.")
FLUSH_SIZE = Histogram(
    "tenk_ingest_flush_size",
    "Events per flush.",
    buckets=(1, 10, 50, 100, 250, 500, 1000, 2000, 5000, 10000, 20000),
)
FLUSH_SECONDS = Histogram(
    "tenk_ingest_flush_seconds",
    "One flush: write, commit and acknowledge.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
# rate() of this is the rows/s.
ROWS_WRITTEN = Counter("tenk_ingest_rows_written_total", "Rows inserted (duplicates skipped are not counted).")
REDELIVERIES = Counter(
    "tenk_ingest_redeliveries_total", "Entries taken over from a crashed run or a dead consumer.", ["how"]
)
REPLAYED = REDELIVERIES.labels("replayed")
CLAIMED = REDELIVERIES.labels("claimed")
DEAD_LETTERS = Counter("tenk_ingest_dead_letters_total", "Events sent to the dead-letter table.")
CONFLICTS = Counter(
    "tenk_ingest_conflicts_total", "Events whose id was already stored with other content (dead-lettered)."
)
VANISHED = Counter("tenk_ingest_vanished_total", "Pending entries deleted from the stream before they were written.")
RECONCILED = Counter("tenk_ingest_backlog_reconciled_total", "Times the backlog counters were found off and reset.")
FLUSHES = Counter(
    "tenk_ingest_flushes_total",
    "Batches written, by way: COPY straight into events, or through the staging table (a batch that may "
    "repeat a stored id, or spans days).",
    ["way"],
)
STRAIGHT_FLUSHES = FLUSHES.labels("straight")
STAGED_FLUSHES = FLUSHES.labels("staged")
FLUSH_RETRIES = Counter("tenk_ingest_flush_retries_total", "Flush attempts that failed on Postgres or Redis.")
