"""The baselines' configuration: the same TENK_* URLs as tenk, plus the NAIVE_* knobs the ladders turn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tenk.settings import DatabaseSettings, RedisSettings

# "1": cache-aside with a Redis pool built on every request, as the product-API study published it.
# "shared": the same cache through one pool per process (the fix). "0": no cache.
RedisCacheMode = Literal["0", "1", "shared"]


class NaiveConfig(BaseSettings):
    """Read from the environment. The handlers build one per request, as the first tasks app did."""

    model_config = SettingsConfigDict(env_prefix="TENK_", extra="ignore")

    database_url: str = ""
    redis_url: str = ""
    upstream_url: str = "http://127.0.0.1:9100"
    # Where `tenk up` puts the embedded servers, unless told otherwise.
    pg_port: int = DatabaseSettings().embedded_port
    redis_port: int = RedisSettings().embedded_port
    # The vendor can take many seconds (the slow-upstream preset); a bound keeps nothing parked forever.
    upstream_timeout_s: float = Field(30.0, validation_alias=AliasChoices("NAIVE_UPSTREAM_TIMEOUT_S"))

    redis_cache: RedisCacheMode = Field("0", validation_alias=AliasChoices("NAIVE_REDIS_CACHE"))
    # 2: RESP2, redis-py's default. 3: RESP3, which the product-API study switched on with its new client.
    redis_protocol: int = Field(2, ge=2, le=3, validation_alias=AliasChoices("NAIVE_REDIS_PROTOCOL"))
    pool: bool = Field(False, validation_alias=AliasChoices("NAIVE_POOL"))
    access_log: bool = Field(True, validation_alias=AliasChoices("NAIVE_ACCESS_LOG"))
    # The product-API study's /metrics, with its raw-path labels (baselines.study_metrics).
    study_metrics: bool = Field(False, validation_alias=AliasChoices("NAIVE_STUDY_METRICS"))

    @property
    def dsn(self) -> str:
        return self.database_url or f"postgresql://postgres@127.0.0.1:{self.pg_port}/tenk"

    @property
    def redis_dsn(self) -> str:
        return self.redis_url or f"redis://127.0.0.1:{self.redis_port}/0"

    def redis_kwargs(self) -> dict[str, Any]:
        """How every baseline's Redis client is built, sync or async, shared or per request."""
        return {"decode_responses": True, "protocol": self.redis_protocol}

    def quote_url(self, symbol: str) -> str:
        return f"{self.upstream_url.rstrip('/')}/v1/quotes/{symbol}"
