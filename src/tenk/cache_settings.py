"""Leaf: how a read-through cache (`tenk.platform.readthrough`) keeps what it reads.

A leaf, outside the platform, because the settings tree (`tenk.settings`) is made of it (the catalog's
branch is one) and the platform imports the tree: here both can import it without a cycle.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class CacheSettings(BaseModel):
    """A read-through cache's settings: as a branch of the tree (`TENK_CATALOG_<FIELD>`), or in code.

    Exactly `local_ttl_s` after a fill, never refreshed by reads: `CacheSettings(local_only=True,
    local_ttl_s=0.2, ttl_jitter=0)` is an in-process cache-aside with a 200 ms absolute TTL.
    """

    local_cache: bool = Field(True, description="Keep a per-process LRU in front of Redis.")
    local_max_items: int = Field(50_000, ge=1, description="Entries in the per-process LRU.")
    local_ttl_s: float = Field(
        5.0,
        gt=0,
        description="Per-process TTL from the fill (reads do not extend it); bounds staleness if an "
        "invalidation is lost.",
    )
    local_only: bool = Field(
        False,
        description="Use no Redis at all: each process's LRU alone. A write drops this process's copy; other "
        "processes' copies last their TTL.",
    )
    redis_cache: bool = Field(True, description="Use Redis as the shared cache layer.")
    redis_ttl_s: float = Field(300, gt=0, description="Redis TTL of a cached item.")
    ttl_jitter: float = Field(
        0.1, ge=0, lt=1, description="TTLs vary by up to this share, so keys don't expire together. 0: exact TTLs."
    )
    negative_ttl_s: float = Field(2.0, gt=0, description="How long a missing id is remembered as missing.")
    fallback_max_inflight: int = Field(8, ge=1, description="Postgres reads in flight per process while Redis is down.")
    fallback_max_wait_s: float = Field(2.0, ge=0, description="Longest queue for a fallback slot before 503.")
    invalidation_ack_timeout_s: float = Field(
        0.25,
        ge=0,
        le=10,
        description="A write answers once every API process has confirmed dropping its cached copy, or after "
        "this long (counted in `tenk_<name>_invalidation_ack_timeouts_total`). 0: answer at once; other processes "
        "then drop their copies as the message reaches them.",
    )
