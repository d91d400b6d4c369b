from __future__ import annotations

from prometheus_client import Counter, Histogram

from tenk.platform import cache_lookup_counter

CALL_LATENCY = Histogram(
    "tenk_upstream_call_duration_seconds",
    "Upstream quote calls by outcome (ok, not_found, error, timeout, unreachable).",
    ["outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 22, 30, 60),
)
REJECTIONS = Counter("tenk_upstream_rejections_total", "Quote requests refused without calling the vendor.", ["reason"])
TIMEOUTS = Counter("tenk_upstream_timeouts_total", "Upstream calls cut off by the per-call timeout.")
COALESCED = Counter("tenk_upstream_coalesced_total", "Quote requests that joined a call already in flight.")
OVERSIZED = Counter(
    "tenk_upstream_oversized_total", "Vendor answers cut off past TENK_UPSTREAM_MAX_BODY_BYTES (each a 502)."
)

# Pre-bound children: label lookup is not free on a hot path.
REJECTED_BULKHEAD = REJECTIONS.labels("bulkhead")
REJECTED_BREAKER = REJECTIONS.labels("breaker")
CACHE_HIT = cache_lookup_counter("quote", "local", "hit")
CACHE_MISS = cache_lookup_counter("quote", "local", "miss")
# A symbol the vendor answered 404 for, answered 404 again from memory.
NOT_FOUND_HIT = cache_lookup_counter("quote_not_found", "local", "hit")
LATENCY_OK = CALL_LATENCY.labels("ok")
LATENCY_NOT_FOUND = CALL_LATENCY.labels("not_found")
LATENCY_ERROR = CALL_LATENCY.labels("error")
LATENCY_TIMEOUT = CALL_LATENCY.labels("timeout")
LATENCY_UNREACHABLE = CALL_LATENCY.labels("unreachable")
