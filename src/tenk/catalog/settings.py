from __future__ import annotations

from pydantic import BaseModel, Field


class CatalogSettings(BaseModel):
    """`settings.catalog` in the tree (tenk.settings): TENK_CATALOG_<FIELD>."""

    local_cache: bool = Field(True, description="Keep a per-process LRU in front of Redis.")
    local_max_items: int = Field(50_000, ge=1, description="Entries in the per-process LRU.")
    local_ttl_s: float = Field(5.0, gt=0, description="Per-process TTL; bounds staleness if an invalidation is lost.")
    redis_cache: bool = Field(True, description="Use Redis as the shared cache layer.")
    redis_ttl_s: int = Field(300, ge=1, description="Redis TTL of a cached product.")
    ttl_jitter: float = Field(
        0.1, ge=0, lt=1, description="TTLs vary by up to this share, so keys don't expire together."
    )
    negative_ttl_s: float = Field(2.0, gt=0, description="How long a missing id is remembered as missing.")
    fallback_max_inflight: int = Field(8, ge=1, description="Postgres reads in flight per process while Redis is down.")
    fallback_max_wait_s: float = Field(2.0, ge=0, description="Longest queue for a fallback slot before 503.")
    invalidation_ack_timeout_s: float = Field(
        0.25,
        ge=0,
        le=10,
        description="A product write answers once every API process has confirmed dropping its cached copy, "
        "or after this long (counted in tenk_catalog_invalidation_ack_timeouts_total). 0: answer at once; "
        "other processes then drop their copies a few ms after the answer.",
    )
