"""The state a step starts from and leaves behind, so that no step inherits the previous one's.

Each rung repeat starts its own target (in-process caches empty) and its own mock upstream (its
stats at zero). Before each rung repeat the Redis the lab owns is flushed (cache entries, the
ingest stream and its counters); a Redis the lab does not own is left alone, and an ingest rung
instead drains its backlog before its workers stop, so the next rung starts with none. Before
each step the mock's stats are reset; after it, its in-flight count (now and the maximum) is read.

For mixes that ingest, each step records what landed: rows written to Postgres per second and the
accept-to-visible lag (p50, p99), both from the `events` table's `accepted_at` and `written_at`
over the step's window (so the direct-INSERT baseline is measured the same way as tenk's worker),
and the backlog at both ends from `/ingest/stats` (tenk only: the baseline has no backlog). A
backlog that grows means the accept rate is not being landed.

Input: the URLs and the Postgres DSN. Output: the `UpstreamStats` and `IngestFigures` kept in the
step's server sample.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TypedDict

import httpx
import psycopg
import redis

from tenk.lab.documents import IngestFigures, UpstreamStats
from tenk.lab.errors import LabError

TIMEOUT_S = 5.0
TARGET_RESET = "target restarted for this repeat (in-process caches empty)"
UPSTREAM_RESET = "mock upstream restarted for this repeat; its stats reset before each step"
REDIS_FLUSHED = "Redis flushed (FLUSHDB: cache, ingest stream and counters) before each rung repeat"
REDIS_PRIVATE = "a private Redis started for the rung (empty)"
INGEST_DRAINED = "ingest backlog drained before the workers stopped (Redis not the lab's: not flushed)"
# A step's backlog may grow by this share of what it accepted (plus a few events) and still count
# as stable: a worker flushing every 100 ms holds that long's events pending at any instant, which
# is under a tenth of a step of a second or more.
BACKLOG_SLACK_SHARE = 0.10
BACKLOG_SLACK_EVENTS = 10
DRAIN_TIMEOUT_S = 30.0

_LANDED = """
SELECT count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM written_at - accepted_at)),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM written_at - accepted_at))
FROM events WHERE written_at > %s AND written_at <= %s
"""


class IngestStats(TypedDict, total=False):
    """tenk's /ingest/stats, the part read here; empty when not tenk or its Redis is down."""

    rows_written: int
    backlog: int


def flush_redis(url: str) -> None:
    with redis.Redis.from_url(url, socket_timeout=TIMEOUT_S) as client:
        client.flushdb()


def db_now(dsn: str) -> datetime | None:
    """Postgres' clock: step windows are compared with `written_at`, which Postgres stamps."""
    try:
        with psycopg.connect(dsn, connect_timeout=int(TIMEOUT_S)) as conn:
            row = conn.execute("SELECT clock_timestamp()").fetchone()
    except psycopg.Error:
        return None
    return row[0] if row else None


def landed(dsn: str, since: datetime | None, until: datetime | None) -> IngestFigures:
    """Rows written in (since, until]: how many, and their accept-to-visible lag."""
    if since is None or until is None or until <= since:
        return {}
    try:
        with psycopg.connect(dsn, connect_timeout=int(TIMEOUT_S)) as conn:
            row = conn.execute(_LANDED, (since, until)).fetchone()
    except psycopg.Error:
        return {}
    if row is None:
        return {}
    count, p50, p99 = row
    return {
        "rows_landed": int(count),
        "lag_p50_ms": None if p50 is None else round(float(p50) * 1000, 1),
        "lag_p99_ms": None if p99 is None else round(float(p99) * 1000, 1),
    }


def drain_ingest(base_url: str, api_key: str, timeout_s: float = DRAIN_TIMEOUT_S) -> int | None:
    """Wait until the workers have written every accepted event; the backlog left (0 when drained)."""
    deadline = time.monotonic() + timeout_s
    while True:
        backlog = ingest_snapshot(base_url, api_key).get("backlog")
        if backlog is None or int(backlog) == 0 or time.monotonic() > deadline:
            return None if backlog is None else int(backlog)
        time.sleep(0.2)  # polling a counter, with a deadline: not synchronisation by sleep


def reset_upstream(url: str, admin_token: str) -> None:
    """Zero the mock vendor's counts for a step. A refusal is a LabError: a step must not report the
    previous steps' calls as its own."""
    try:
        response = httpx.delete(url + "/stats", headers={"Authorization": f"Bearer {admin_token}"}, timeout=TIMEOUT_S)
    except httpx.HTTPError:
        return
    if response.status_code in (401, 403):
        raise LabError(f"the mock vendor refused to reset its counts ({response.status_code}): {response.text[:200]}")


def upstream_snapshot(url: str) -> UpstreamStats:
    """The mock's requests parked right now and at most during the step."""
    try:
        body = httpx.get(url + "/stats", timeout=TIMEOUT_S).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return {
        "requests": body.get("requests"),
        "in_flight": body.get("in_flight"),
        "max_in_flight": body.get("max_in_flight"),
        "client_gone": body.get("client_gone"),
    }


def ingest_snapshot(base_url: str, api_key: str) -> IngestStats:
    try:
        response = httpx.get(
            base_url + "/ingest/stats", headers={"Authorization": f"Bearer {api_key}"}, timeout=TIMEOUT_S
        )
        body = response.json() if response.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}
    if "backlog" not in body:
        return {}  # not tenk, or Redis down: no backlog is better than a made-up zero
    return {"rows_written": body.get("rows_written", 0), "backlog": body["backlog"]}


def ingest_figures(start: IngestStats, end: IngestStats, rows: IngestFigures, seconds: float) -> IngestFigures:
    """A step's ingest figures: `rows` from `landed`, the backlog from two `ingest_snapshot`s, and the
    rate over the step's measured `seconds` (the load's, not the window's: the window also spans the
    generator's start and stop, when nothing arrives)."""
    figures = rows.copy()
    if rows and seconds > 0:
        figures["rows_landed_per_s"] = round(int(rows["rows_landed"]) / seconds, 1)
    if start and end and "backlog" in start and "backlog" in end:
        growth = int(end["backlog"]) - int(start["backlog"])
        accepted = int(rows.get("rows_landed", 0)) + max(0, growth)
        figures.update({
            "backlog_start": start["backlog"],
            "backlog_end": end["backlog"],
            "backlog_growth": growth,
            "backlog_grew": growth > BACKLOG_SLACK_SHARE * accepted + BACKLOG_SLACK_EVENTS,
        })  # fmt: skip
    return figures


def backlog_failures(ingest: IngestFigures) -> list[str]:
    """Why a step fails a backlog-stable search: accepted faster than landed, or not known to have kept up."""
    if "backlog_grew" not in ingest:
        # /ingest/stats did not answer in time at one end: a step is passed on evidence, never for want of it.
        return ["backlog unknown: /ingest/stats did not answer at the step's start or end"]
    if not ingest["backlog_grew"]:
        return []
    return [f"backlog grew {ingest['backlog_start']} -> {ingest['backlog_end']} (accepted faster than landed)"]
