from __future__ import annotations

from prometheus_client import Counter, Histogram

from tenk.ops.metrics import cache_lookup_counter

# Pre-bound children: label lookup is not free on a path that runs 10k times a second.
LOCAL_HIT = cache_lookup_counter("product", "local", "hit")
LOCAL_MISS = cache_lookup_counter("product", "local", "miss")
REDIS_HIT = cache_lookup_counter("product", "redis", "hit")
REDIS_MISS = cache_lookup_counter("product", "redis", "miss")
REDIS_ERROR = cache_lookup_counter("product", "redis", "error")
DB_READS = Counter("tenk_catalog_db_reads_total", "Product reads that reached Postgres.", ["path"])
DB_READ_NORMAL = DB_READS.labels("normal")
DB_READ_FALLBACK = DB_READS.labels("redis_down")
DB_READ_REPLICA = DB_READS.labels("replica")
REPLICA_BEHIND = Counter(
    "tenk_catalog_replica_behind_total",
    "Product misses the primary answered because the replica had not replayed the product's last write.",
)
INVALIDATIONS = Counter("tenk_catalog_invalidations_total", "Local cache invalidations by origin.", ["origin"])
INVALIDATION_FAILURES = Counter(
    "tenk_catalog_invalidation_failures_total", "Writes whose Redis invalidation was left to the outbox replay."
)
INVALIDATION_ACK_TIMEOUTS = Counter(
    "tenk_catalog_invalidation_ack_timeouts_total",
    "Writes that answered before every process confirmed dropping its cached copy "
    "(TENK_CATALOG_INVALIDATION_ACK_TIMEOUT_S ran out).",
)
INVALIDATIONS_REPLAYED = Counter(
    "tenk_catalog_invalidations_replayed_total", "Invalidations delivered from the outbox after the writer could not."
)
FILLS_FAILED = Counter(
    "tenk_catalog_redis_fills_failed_total", "Product reads Redis did not cache (full, or unreachable mid-read)."
)
PAST_CEILING = Counter(
    "tenk_catalog_past_ceiling_total", "Product reads answered 404 at once: the id is past the highest one stored."
)
DB_BATCH_SIZE = Histogram(
    "tenk_catalog_db_batch_size",
    "Product reads that missed every cache and went to Postgres together, in one query of two or more "
    "(a lone read is not observed: observing costs it 2 %; tenk_catalog_db_reads_total counts every read).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)
REDIS_BATCH_SIZE = Histogram(
    "tenk_catalog_redis_batch_size",
    "Product reads that missed the process's cache and looked in Redis together, in one MGET of two or more "
    "(a lone lookup is not observed).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)
