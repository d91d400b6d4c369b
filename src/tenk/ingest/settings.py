from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

WriteMode = Literal["copy", "insert"]
Durability = Literal["everysec", "always"]


class IngestSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TENK_INGEST_", extra="ignore")

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
        500_000, ge=1, description="Above this many unwritten events (lag + pending), POSTs answer 503."
    )
    durability: Durability = Field(
        "everysec",
        description="Redis AOF fsync: `everysec` may lose ~1 s of accepted events if Redis crashes; `always` none.",
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
    metrics_port: int = Field(0, ge=0, le=65535, description="`tenk worker` serves /metrics here; 0: off.")
