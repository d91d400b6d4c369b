"""The ingestion study's write path, measured beside tenk's in `make bench-ingest`: the handler INSERTs
each event and commits, one transaction per request. Same server, framework, parsing and auth as
tenk's POST /events; only the write differs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from fastapi import Depends, FastAPI, Request
from starlette.responses import Response

from tenk.ingest import codec, queries
from tenk.platform.auth import require_writer
from tenk.platform.connections import create_pg_pool, pg_pool_options
from tenk.platform.errors import error_response, install_error_handlers
from tenk.settings import Settings


def create_app() -> FastAPI:
    settings = Settings()  # a server calls this factory: the entry point reads the tree

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.pg = await create_pg_pool(settings.resolved_database_url, **pg_pool_options(settings))
        try:
            yield
        finally:
            await app.state.pg.close()

    app = FastAPI(lifespan=lifespan)
    app.state.settings = settings
    app.state.accepted_key_digests = settings.accepted_key_digests
    install_error_handlers(app)

    @app.post("/events", status_code=202, dependencies=[Depends(require_writer)])
    async def post_event(request: Request) -> Response:
        try:
            entry, event_id = codec.parse_one(await request.body())
        except codec.EventErrors as exc:
            return error_response(422, "invalid_input", "the event is not valid", exc.problems)
        event_id, source, ts, accepted_us, payload = entry.decode().split("\t", 4)
        pool: asyncpg.Pool = request.app.state.pg
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(queries.INSERT_ONE, event_id, source, ts, payload, accepted_us)
        return Response(b'{"accepted":1,"ids":["' + event_id.encode() + b'"]}', 202, media_type="application/json")

    return app
