from __future__ import annotations

from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import Response  # a 204's documented class: no body, no media type

from tenk.platform import (
    CursorCodec,
    NotFoundError,
    Reply,
    ReplyRoute,
    app_state,
    created,
    cursors,
    errors_documented,
    hot,
    keyset_page,
    no_content,
    require_reader,
    require_writer,
)
from tenk.tasks import queries
from tenk.tasks.schemas import Task, TaskIn, TaskPage, TaskPatch

router = APIRouter(prefix="/tasks", tags=["tasks"], route_class=ReplyRoute)

DEFAULT_LIMIT, MAX_LIMIT = 25, 100
TaskId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Task id.")]
PgDep = Annotated[asyncpg.Pool, app_state("pg")]
TaskCursors = Annotated[CursorCodec, cursors("tasks")]

_NO_SUCH_TASK = errors_documented({404: "No such task"})
# Where a created task's id leads: schemathesis's stateful phase follows these.
_LINKS: dict[str, Any] = {
    name: {"operationId": operation, "parameters": {"task_id": "$response.body#/id"}}
    for name, operation in [("GetTask", "get_task"), ("PatchTask", "patch_task"), ("DeleteTask", "delete_task")]
}


def _one(row: str | None) -> bytes:
    if row is None:
        raise NotFoundError("no such task", field="path.task_id")
    return row.encode()


@router.post(
    "",
    status_code=201,
    response_model=Task,
    responses={201: {"description": "Created; `Location` names it", "links": _LINKS}},
    dependencies=[Depends(require_writer)],
    operation_id="create_task",
    summary="Create a task",
)
@hot
async def create_task(task: TaskIn, pg: PgDep) -> Reply:
    return created(_one(await pg.fetchval(queries.INSERT_TASK, task.title, task.notes, task.done)), router.prefix)


@router.get(
    "/{task_id}",
    response_model=Task,
    responses=_NO_SUCH_TASK,
    dependencies=[Depends(require_reader)],
    operation_id="get_task",
    summary="One task",
)
@hot
async def get_task(task_id: TaskId, pg: PgDep) -> Reply:
    return Reply(200, _one(await pg.fetchval(queries.TASK_BY_ID, task_id)))


@router.patch(
    "/{task_id}",
    response_model=Task,
    responses=_NO_SUCH_TASK,
    dependencies=[Depends(require_writer)],
    operation_id="patch_task",
    summary="Change a task",
)
async def patch_task(task_id: TaskId, patch: TaskPatch, pg: PgDep) -> Reply:
    return Reply(200, _one(await pg.fetchval(queries.PATCH_TASK, task_id, patch.title, patch.notes, patch.done)))


@router.delete(
    "/{task_id}",
    status_code=204,
    response_class=Response,
    responses=_NO_SUCH_TASK,
    dependencies=[Depends(require_writer)],
    operation_id="delete_task",
    summary="Delete a task",
)
async def delete_task(task_id: TaskId, pg: PgDep) -> Reply:
    if await pg.fetchval(queries.DELETE_TASK, task_id) is None:
        raise NotFoundError("no such task", field="path.task_id")
    return no_content()


@router.get(
    "",
    response_model=TaskPage,
    dependencies=[Depends(require_reader)],
    operation_id="list_tasks",
    summary="Tasks by id, keyset",
)
@hot
async def list_tasks(
    pg: PgDep,
    codec: TaskCursors,
    after: Annotated[str | None, Query(max_length=512, description="Opaque cursor from the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> Reply:
    last_id = codec.decode(after, shape=(int,))[0] if after else 0
    rows = await pg.fetch(queries.TASK_PAGE, last_id, limit + 1)
    return Reply(200, keyset_page(rows, limit, codec))
