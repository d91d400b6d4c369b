"""The catalog's counters the tests read by name: its products' cache's
(`service.PRODUCTS`), exported as `tenk_catalog_*` and `tenk_cache_lookups_total{cache="product"}`."""

from __future__ import annotations

from tenk.catalog.service import PRODUCTS

LOCAL_HIT = PRODUCTS.metrics.local_hit
DB_READ_REPLICA = PRODUCTS.metrics.db_read_replica
REPLICA_BEHIND = PRODUCTS.metrics.replica_behind
