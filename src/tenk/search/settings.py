from __future__ import annotations

from pydantic import BaseModel, Field


class SearchSettings(BaseModel):
    """`settings.search` in the tree (tenk.settings): TENK_SEARCH_<FIELD>."""

    cache: bool = Field(True, description="Cache result pages per process; repeated queries skip Postgres.")
    cache_ttl_s: float = Field(
        10.0, gt=0, description="How long a result page is reused; new or changed products show up within it."
    )
    cache_quiet_ttl_s: float = Field(
        300.0,
        ge=0,
        description="How long a result page is reused while no product has changed since it was loaded, as far as "
        "this process's invalidation listener knows; each page's is drawn between half and all of it (at least "
        "`cache_ttl_s`; 0: `cache_ttl_s` always). A product write puts every page back on `cache_ttl_s`; with read "
        "replicas, `cache_ttl_s` always (a replica may lag the message). Bounds writes that skip the invalidation "
        "outbox, such as a TRUNCATE, as the catalog's `redis_ttl_s` bounds them for products.",
    )
    cache_refresh_ahead: float = Field(
        0.8,
        gt=0,
        le=1,
        description="A page asked for after this share of its lifetime is reloaded in the background while the cached "
        "copy is served, so popular pages never expire under traffic.",
    )
    cache_max_items: int = Field(10_000, ge=1, description="Result pages kept per process.")
    candidates: int = Field(
        20,
        ge=10,
        le=10_000,
        description="Postings read per query word before ranking, for a page of up to 10 results (in proportion "
        "for larger pages; six times as many per word pair); more is slower and closer to ranking every match.",
    )
    max_inflight: int = Field(
        4,
        ge=1,
        description="Search queries in Postgres at once per process (its own pool), so search never starves "
        "the shared pool.",
    )
    max_wait_s: float = Field(
        1.0, ge=0, description="How long a search waits for a free slot before it is shed with 503 and Retry-After."
    )
    statement_timeout_ms: int = Field(
        2_000, ge=1, description="Postgres cancels a search query that runs longer; the client gets 503."
    )
    client_rate: float = Field(
        20.0,
        ge=0,
        description="Statements a second that the searches of one client without an API key may send to Postgres "
        "(cached pages cost none; a new spelling one more); past its burst, 429 with Retry-After. Counted per "
        "process, by client address (IPv6 by /64). 0: no limit.",
    )
    client_burst: int = Field(
        60, ge=1, description="Statements a client without an API key may send at once before `client_rate` applies."
    )
    anonymous_db_share: float = Field(
        0.15,
        ge=0,
        description="Seconds of Postgres statement time a second that searches from clients without an API key may "
        "take together, per process (0.15: 15% of a core's worth); while it is spent they get 429 with Retry-After "
        "(cached pages and key holders never do). 0: no limit.",
    )
