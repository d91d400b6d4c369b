from __future__ import annotations

from pydantic import BaseModel, Field

# Starts with a letter or digit so that "." and ".." can never become path segments upstream.
SYMBOL_PATTERN = r"^[A-Z0-9][A-Z0-9.]{0,11}$"


class Quote(BaseModel):
    """A quote as the vendor gave it, re-issued in our shape (at most `TENK_UPSTREAM_CACHE_TTL_S` old)."""

    symbol: str = Field(examples=["AAPL"])
    price: float = Field(examples=[187.25])
    currency: str = Field(examples=["USD"])
    as_of_ms: int = Field(description="When the vendor priced it, Unix milliseconds.")
