from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class SearchSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TENK_SEARCH_", extra="ignore")

    cache: bool = Field(True, description="Cache result pages per process; repeated queries skip Postgres.")
    cache_ttl_s: float = Field(
        10.0, gt=0, description="How long a result page is reused; new or changed products show up within it."
    )
    cache_max_items: int = Field(10_000, ge=1, description="Result pages kept per process.")
