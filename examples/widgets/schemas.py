from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from tenk.platform import PgText


class WidgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[PgText, Field(min_length=1, max_length=200)]
    price_cents: Annotated[int, Field(ge=0, le=10**12)]


class Widget(WidgetIn):
    id: int
