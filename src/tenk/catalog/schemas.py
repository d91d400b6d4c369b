from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from tenk.platform import PatchModel, PgText

Sku = Annotated[PgText, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")]
Name = Annotated[PgText, Field(min_length=1, max_length=200)]
Description = Annotated[PgText, Field(max_length=4000)]
PriceCents = Annotated[int, Field(ge=0, le=10**12)]
Stock = Annotated[int, Field(ge=0, le=2**31 - 1)]


class ProductIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: Sku
    name: Name
    description: Description = ""
    price_cents: PriceCents
    stock: Stock = 0


class ProductPatch(PatchModel):
    sku: Sku | None = None
    name: Name | None = None
    description: Description | None = None
    price_cents: PriceCents | None = None
    stock: Stock | None = None


class Product(BaseModel):
    id: int
    sku: str
    name: str
    description: str
    price_cents: int
    stock: int
    updated_at: datetime


class ProductPage(BaseModel):
    items: list[Product]
    next: str | None = Field(None, description="Pass as `after` for the next page; null on the last page.")
