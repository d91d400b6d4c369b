from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tenk.ingest.schemas import MAX_BATCH, MAX_PAYLOAD_BYTES

WriteMode = Literal["copy", "insert"]
Durability = Literal["everysec", "always", "replicated"]


def appendfsync_for(durability: Durability) -> str:
    """Redis's AOF fsync policy for a durability promise: `replicated` adds WAIT to `everysec`."""
    return "everysec" if durability == "replicated" else durability


class IngestSettings(BaseModel):
    """`settings.ingest` in the tree (tenk.settings): TENK_INGEST_<FIELD>."""

    batch: int = Field(1000, ge=1, le=20_000, description="Events per flush; 1 writes each event alone.")
    connections: int = Field(2, ge=1, le=16, description="Postgres connections per worker: flushes in flight at once.")
    flush_ms: int = Field(
        100, ge=1, description="Longest an event waits in the worker's buffer before a flush, from its arrival."
    )
    write_mode: WriteMode = Field(
        "copy",
        description="`copy`: COPY into a staging table, then INSERT..SELECT. `insert`: one INSERT per event.",
    )
    max_backlog: int = Field(
        500_000,
        ge=MAX_BATCH,
        description="A POST that would take the unwritten events (lag + pending) past this many answers 503.",
    )
    max_backlog_bytes: int = Field(
        256 * 1024 * 1024,
        ge=MAX_PAYLOAD_BYTES,
        description="A POST that would take the unwritten events' bytes past this many answers 503: keep it "
        "well below Redis's maxmemory minus what the cache needs, so the stream can never push Redis into OOM.",
    )
    reconcile_every_ms: int = Field(
        10_000, ge=100, description="How often a worker resets the backlog counters from the stream itself."
    )
    reconcile_limit: int = Field(
        10_000,
        ge=1,
        description="A reconcile counts at most this many backlogged entries (it blocks Redis while it counts).",
    )
    durability: Durability = Field(
        "everysec",
        description="Redis AOF fsync: `everysec` may lose the last second's events if Redis crashes; `always` none. "
        "`replicated`: `everysec`, and a 202 only once a replica has the events too (`WAIT 1`), else 503. "
        "`tenk up` starts the embedded Redis with it; the API checks it and `/ready` is degraded when Redis is weaker.",
    )
    replica_wait_ms: int = Field(
        1_000, ge=1, description="With `replicated` durability, how long a POST waits for a replica's acknowledgement."
    )
    shards: int = Field(
        1,
        ge=1,
        le=1024,
        description="Streams the events are split into (by a hash of `source`), each with its own group, backlog "
        "and trimming; every worker reads all of them. More than 1 spreads ingest over a Redis Cluster's masters.",
    )
    max_deliveries: int = Field(
        10, ge=1, description="An event delivered more times than this goes to the dead-letter table."
    )
    claim_idle_ms: int = Field(
        60_000, ge=1, description="Pending entries idle this long (their consumer died) are claimed by another."
    )
    claim_every_ms: int = Field(5_000, ge=10, description="How often a worker looks for such entries.")
    block_ms: int = Field(1_000, ge=1, description="How long one XREADGROUP waits for new entries.")
    trim_every_ms: int = Field(
        1_000, ge=10, description="How often a worker trims entries every group has acknowledged."
    )
    backlog_poll_ms: int = Field(
        100, ge=10, description="How often the API re-reads the backlog that backpressure is decided on."
    )
    shutdown_timeout_s: float = Field(
        10.0, gt=0, description="On SIGTERM, how long to keep trying to flush what is in hand."
    )
    redis_timeout_s: float = Field(
        2.0, gt=0, description="Socket timeout of the ingest Redis clients (an `always` fsync takes a while)."
    )
    retention_days: int = Field(
        0,
        ge=0,
        description="Workers drop the day partitions of `events` wholly older than this many days (hourly); "
        "0: keep every event.",
    )
    dead_letter_retention_days: int = Field(
        30,
        ge=0,
        description="Workers delete dead letters older than this many days (hourly); 0: keep every one.",
    )
    metrics_port: int = Field(0, ge=0, le=65535, description="`tenk worker` serves /metrics here; 0: off.")
    metrics_host: str = Field(
        "127.0.0.1", description="Address the worker's /metrics binds to; 0.0.0.0 in a container, to be scraped."
    )
