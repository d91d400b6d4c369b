"""`GET /tasks` (a keyset page) in the hot lane (see tenk.hotpath); FastAPI's route documents and validates it."""

from __future__ import annotations

from urllib.parse import parse_qsl

from tenk.hotpath import HotRequest, HotResult, HotRoute
from tenk.pagination import MAX_CURSOR_CHARS, cursor_codec, keyset_page
from tenk.tasks import queries

DEFAULT_LIMIT, MAX_LIMIT = 25, 100


async def list_tasks(request: HotRequest) -> HotResult:
    params = parse_qsl(request.scope["query_string"].decode("latin-1"), keep_blank_values=True)
    given = dict(params)
    # Only the plain cases; repeated, unknown or malformed parameters go to FastAPI for a proper 422.
    if len(given) != len(params) or not given.keys() <= {"after", "limit"}:
        return None
    limit_text = given.get("limit", str(DEFAULT_LIMIT))
    if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= MAX_LIMIT:
        return None
    after = given.get("after", "")
    if len(after) > MAX_CURSOR_CHARS:
        return None
    codec = cursor_codec(request.state.settings.cursor_secret, "tasks")
    last_id = codec.decode(after, shape=(int,))[0] if after else 0
    limit = int(limit_text)
    rows = await request.state.pg.fetch(queries.TASK_PAGE, last_id, limit + 1)
    return 200, keyset_page(rows, limit, codec), None


ROUTE = HotRoute("GET", "/tasks", list_tasks)
