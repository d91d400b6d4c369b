from __future__ import annotations

from typing import Annotated

import asyncpg
from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from tenk.errors import NotFoundError
from tenk.ops.auth import require_reader, require_writer
from tenk.pagination import cursor_codec, keyset_page
from tenk.tasks import queries
from tenk.tasks.hot import DEFAULT_LIMIT, MAX_LIMIT
from tenk.tasks.schemas import Task, TaskIn, TaskPage, TaskPatch

router = APIRouter(prefix="/tasks", tags=["tasks"])

TaskId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Task id.")]
_JSON = "application/json"


def _pg(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool = request.app.state.pg
    return pool


def _one(row: str | None, status: int = 200) -> Response:
    if row is None:
        raise NotFoundError("no such task", field="path.task_id")
    return Response(row.encode(), status, media_type=_JSON)


@router.post("", status_code=201, response_model=Task, dependencies=[Depends(require_writer)], summary="Create a task")
async def create_task(task: TaskIn, request: Request) -> Response:
    return _one(await _pg(request).fetchval(queries.INSERT_TASK, task.title, task.notes, task.done), 201)


@router.get("/{task_id}", response_model=Task, dependencies=[Depends(require_reader)], summary="One task")
async def get_task(task_id: TaskId, request: Request) -> Response:
    return _one(await _pg(request).fetchval(queries.TASK_BY_ID, task_id))


@router.patch("/{task_id}", response_model=Task, dependencies=[Depends(require_writer)], summary="Change a task")
async def patch_task(task_id: TaskId, patch: TaskPatch, request: Request) -> Response:
    return _one(await _pg(request).fetchval(queries.PATCH_TASK, task_id, patch.title, patch.notes, patch.done))


@router.get("", response_model=TaskPage, dependencies=[Depends(require_reader)], summary="Tasks by id, keyset")
async def list_tasks(
    request: Request,
    after: Annotated[str | None, Query(max_length=512, description="Opaque cursor from the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> Response:
    codec = cursor_codec(request.app.state.settings.cursor_secret, "tasks")
    last_id = codec.decode(after, shape=(int,))[0] if after else 0
    rows = await _pg(request).fetch(queries.TASK_PAGE, last_id, limit + 1)
    return Response(keyset_page(rows, limit, codec), media_type=_JSON)
