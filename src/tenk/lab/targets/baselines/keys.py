"""Every Redis key the baselines use."""

from __future__ import annotations

# A product's JSON, cached on a miss when NAIVE_REDIS_CACHE is on. Lives PRODUCT_TTL_S and is never
# invalidated (the published cache-aside had no invalidation). Its own prefix keeps it apart from tenk's.
_PRODUCT = "naive:product:"
PRODUCT_TTL_S = 300


def product_key(product_id: int) -> str:
    return f"{_PRODUCT}{product_id}"
