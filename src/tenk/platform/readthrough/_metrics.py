"""A read-through cache's metrics: `tenk_<name>_*`, and its lookups in `tenk_cache_lookups_total{cache="<item>"}`.

Made once per cache name, for the life of the process: every app of a process (tests run several)
counts into the same series, as Prometheus's registry requires. Children are bound here, once: label
lookup is not free on a path that runs on every request.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from tenk.platform.metrics import CacheLookupCounter, cache_lookup_counter

_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True, slots=True)
class CacheMetrics:
    item: str
    local_hit: CacheLookupCounter
    local_miss: CacheLookupCounter
    redis_hit: CacheLookupCounter
    redis_miss: CacheLookupCounter
    redis_error: CacheLookupCounter
    db_read_normal: Counter
    db_read_fallback: Counter
    db_read_replica: Counter
    replica_behind: Counter
    invalidated_by_write: Counter
    invalidated_by_message: Counter
    invalidation_failures: Counter
    invalidation_ack_timeouts: Counter
    invalidations_replayed: Counter
    fills_failed: Counter
    past_ceiling: Counter
    db_batch_size: Histogram
    redis_batch_size: Histogram


_MADE: dict[str, CacheMetrics] = {}


def cache_metrics(name: str, item: str) -> CacheMetrics:
    """The metrics of the cache `name`, made on first use."""
    made = _MADE.get(name)
    if made is not None:
        if made.item != item:
            raise ValueError(f"cache {name!r} counts {made.item!r} lookups already; it cannot count {item!r} too")
        return made
    items = item.capitalize()
    db_reads = Counter(f"tenk_{name}_db_reads_total", f"{items} reads that reached Postgres.", ["path"])
    invalidations = Counter(f"tenk_{name}_invalidations_total", "Local cache invalidations by origin.", ["origin"])
    made = CacheMetrics(
        item=item,
        local_hit=cache_lookup_counter(item, "local", "hit"),
        local_miss=cache_lookup_counter(item, "local", "miss"),
        redis_hit=cache_lookup_counter(item, "redis", "hit"),
        redis_miss=cache_lookup_counter(item, "redis", "miss"),
        redis_error=cache_lookup_counter(item, "redis", "error"),
        db_read_normal=db_reads.labels("normal"),
        db_read_fallback=db_reads.labels("redis_down"),
        db_read_replica=db_reads.labels("replica"),
        replica_behind=Counter(
            f"tenk_{name}_replica_behind_total",
            f"{items} misses the primary answered because the replica had not replayed the {item}'s last write.",
        ),
        invalidated_by_write=invalidations.labels("local_write"),
        invalidated_by_message=invalidations.labels("pubsub"),
        invalidation_failures=Counter(
            f"tenk_{name}_invalidation_failures_total", "Writes whose Redis invalidation was left to the outbox replay."
        ),
        invalidation_ack_timeouts=Counter(
            f"tenk_{name}_invalidation_ack_timeouts_total",
            "Writes that answered before every process confirmed dropping its cached copy "
            "(the cache's invalidation_ack_timeout_s ran out).",
        ),
        invalidations_replayed=Counter(
            f"tenk_{name}_invalidations_replayed_total",
            "Invalidations delivered from the outbox after the writer could not.",
        ),
        fills_failed=Counter(
            f"tenk_{name}_redis_fills_failed_total",
            f"{items} reads Redis did not cache (full, or unreachable mid-read).",
        ),
        past_ceiling=Counter(
            f"tenk_{name}_past_ceiling_total",
            f"{items} reads answered 404 at once: the id is past the highest one stored.",
        ),
        db_batch_size=Histogram(
            f"tenk_{name}_db_batch_size",
            f"{items} reads that missed every cache and went to Postgres together, in one query of two or more "
            f"(a lone read is not observed, which would cost it; tenk_{name}_db_reads_total counts every read).",
            buckets=_BATCH_BUCKETS,
        ),
        redis_batch_size=Histogram(
            f"tenk_{name}_redis_batch_size",
            f"{items} reads that missed the process's cache and looked in Redis together, in one MGET of two or "
            "more (a lone lookup is not observed).",
            buckets=_BATCH_BUCKETS,
        ),
    )
    _MADE[name] = made
    return made
