"""Service-wide settings. Each domain keeps its own settings class beside its code (`catalog/settings.py`, ...)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ServerName = Literal["granian", "uvicorn", "gunicorn"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TENK_", extra="ignore")

    database_url: str = Field("", description="Postgres DSN. Empty: the embedded server started by `tenk up`.")
    redis_url: str = Field("", description="Redis URL. Empty: the embedded server started by `tenk up`.")
    data_dir: Path = Field(Path(".tenk"), description="Where the embedded servers keep data, logs and the dev key.")
    pg_port: int = Field(54329, description="Port of the embedded Postgres.")
    redis_port: int = Field(63799, description="Port of the embedded Redis.")

    db_pool_min: int = Field(4, ge=1, description="asyncpg pool: connections kept open per API process.")
    db_pool_max: int = Field(16, ge=1, description="asyncpg pool: most connections per API process.")
    db_timeout_s: float = Field(5.0, gt=0, description="Wait for a pool connection, and per-statement timeout.")
    redis_pool_max: int = Field(64, ge=1, description="Most Redis connections per API process.")
    redis_timeout_s: float = Field(0.25, gt=0, description="Redis socket timeout; Redis is a cache, fail fast.")

    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated SHA-256 hex digests of the accepted API keys (never the keys themselves).",
    )
    auth_reads: bool = Field(False, description="Require an API key for reads too.")
    max_body_bytes: int = Field(1024 * 1024, ge=1, description="Larger request bodies get 413.")
    cursor_secret: str = Field("tenk-dev-cursor-secret", description="HMAC key that signs pagination cursors.")

    access_log: bool = Field(False, description="Log one JSON line per request.")
    log_level: str = Field("INFO", description="Root log level.")

    host: str = Field("127.0.0.1", description="`tenk serve` bind address.")
    port: int = Field(8000, description="`tenk serve` port.")
    server: ServerName = Field("granian", description="`tenk serve` server; the fastest measured is the default.")
    workers: int = Field(1, ge=1, description="`tenk serve` worker processes.")

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().lower() for part in value.split(",") if part.strip()]
        return value

    @property
    def accepted_key_digests(self) -> list[str]:
        """TENK_API_KEYS, or, when that is empty, the dev key written by `tenk up`."""
        if self.api_keys:
            return self.api_keys
        from tenk.stack.devkey import dev_key_digest

        dev = dev_key_digest(self.data_dir)
        return [dev] if dev else []

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"postgresql://postgres@127.0.0.1:{self.pg_port}/tenk"

    @property
    def resolved_redis_url(self) -> str:
        return self.redis_url or f"redis://127.0.0.1:{self.redis_port}/0"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
