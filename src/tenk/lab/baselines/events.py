"""The event a client posts, and the 202 answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from tenk.models import PgText


class EventIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event_id: UUID
    source: PgText = Field(min_length=1, max_length=64)
    ts: datetime
    payload: dict[str, Any]


class EventAccepted(BaseModel):
    event_id: UUID
