"""Request and response models. Inputs are tenk's own models, so bad input gets the same 4xx as tenk."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from pydantic import BaseModel

from tenk.catalog.schemas import Product, ProductIn
from tenk.platform import PgText
from tenk.search.routes import SearchHit, SearchResults
from tenk.tasks.schemas import Task, TaskIn
from tenk.upstream.schemas import SYMBOL_PATTERN, Quote

__all__ = [
    "After",
    "Limit",
    "Product",
    "ProductId",
    "ProductIn",
    "ProductPage",
    "Quote",
    "SearchHit",
    "SearchLimit",
    "SearchQuery",
    "SearchResults",
    "Symbol",
    "Task",
    "TaskId",
    "TaskIn",
    "TaskPage",
]

ProductId = Annotated[int, Path(ge=1, le=2**63 - 1)]
TaskId = Annotated[int, Path(ge=1, le=2**63 - 1)]
Limit = Annotated[int, Query(ge=1, le=100)]
After = Annotated[str | None, Query(max_length=512)]
SearchQuery = Annotated[PgText, Query(min_length=1, max_length=200)]
SearchLimit = Annotated[int, Query(ge=1, le=50)]
Symbol = Annotated[str, Path(min_length=1, max_length=12, pattern=SYMBOL_PATTERN)]


class ProductPage(BaseModel):
    items: list[Product]
    next: str | None = None


class TaskPage(BaseModel):
    items: list[Task]
    next: str | None = None
