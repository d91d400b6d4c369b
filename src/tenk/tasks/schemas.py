from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from tenk.platform import PatchModel, PgText

Title = Annotated[PgText, Field(min_length=1, max_length=200)]
Notes = Annotated[PgText, Field(max_length=4000)]


class TaskIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: Title
    notes: Notes = ""
    done: bool = False


class TaskPatch(PatchModel):
    title: Title | None = None
    notes: Notes | None = None
    done: bool | None = None


class Task(BaseModel):
    id: int
    title: str
    notes: str
    done: bool
    created_at: datetime
    updated_at: datetime


class TaskPage(BaseModel):
    items: list[Task]
    next: str | None = Field(None, description="Pass as `after` for the next page; null on the last page.")
