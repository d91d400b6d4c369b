from __future__ import annotations

from pydantic import AnyHttpUrl, BaseModel, Field


class UpstreamSettings(BaseModel):
    """`settings.upstream` in the tree (tenk.settings): TENK_UPSTREAM_<FIELD>."""

    url: AnyHttpUrl = Field(
        AnyHttpUrl("http://127.0.0.1:9100"), description="The quotes vendor; `make run` starts a mock there."
    )
    mock: bool | None = Field(
        None,
        description="Whether `tenk dev` starts the mock vendor at `url`; unset, it does when `url` is not set "
        "(a vendor named by its address is taken to be real).",
    )
    timeout_s: float = Field(10.0, gt=0, description="Whole-call budget per upstream call; past it, 504.")
    connect_timeout_s: float | None = Field(
        None,
        gt=0,
        description="A separate budget for opening a connection; unset, the whole-call timeout covers it. "
        "A burst of new connections (a cold pool under load) lags a busy core's event loop by seconds, and a "
        "short connect budget turns that lag into failures that open the breaker.",
    )
    max_inflight: int = Field(
        2048,
        ge=1,
        description="Upstream calls in flight per process (the bulkhead); more get 503 at once. "
        "Also the connection pool's size, so no admitted call waits for a connection.",
    )
    cache_ttl_s: float = Field(1.0, ge=0, description="How long a quote is served from memory; 0 turns it off.")
    cache_max_items: int = Field(
        10_000, ge=1, description="Quotes kept in memory per process; as many unknown symbols, kept apart."
    )
    not_found_ttl_s: float = Field(
        10.0,
        ge=0,
        description="How long a symbol the vendor answered 404 for is answered 404 from memory, without a call; "
        "0 turns it off. Kept apart from the quotes, so made-up symbols never evict them.",
    )
    max_body_bytes: int = Field(
        16 * 1024,
        ge=256,
        description="Largest vendor answer read; past it the call is a vendor failure (502, counted by the breaker).",
    )
    breaker_failure_ratio: float = Field(0.5, gt=0, le=1, description="Failure share that opens the breaker.")
    breaker_window_s: float = Field(10.0, gt=0, description="Window the failure share is measured over.")
    breaker_min_calls: int = Field(20, ge=1, description="Calls in the window before the breaker may open.")
    breaker_open_s: float = Field(5.0, gt=0, description="How long it stays open before one probe is let through.")

    @property
    def base_url(self) -> str:
        return str(self.url).rstrip("/")
