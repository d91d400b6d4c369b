"""The fixed anchor of `bench_reads --probe`: TechEmpower's FastAPI entry, re-stated (not copied) from its
public test rules and implementation.

`GET /db` draws an id in 1..10,000, reads that row's one number with asyncpg's `fetchval` on a
connection from a pool of asyncpg's default size (10: the entry passes no sizes), and answers
`{"id": ..., "randomNumber": ...}` through starlette's JSONResponse. The table lives in its own schema, `tfb`, of tenk's
database, created and filled at start-up when missing, so the anchor reads the same Postgres as tenk.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI
from starlette.responses import JSONResponse

from tenk.settings import Settings

WORLD_ROWS = 10_000
READ_NUMBER = 'SELECT "randomnumber", "id" FROM tfb.world WHERE id = $1'
CREATE_WORLD = """
CREATE SCHEMA IF NOT EXISTS tfb;
CREATE TABLE IF NOT EXISTS tfb.world (id integer PRIMARY KEY, randomnumber integer NOT NULL);
INSERT INTO tfb.world
SELECT n, (random() * 9999)::integer + 1 FROM generate_series(1, 10000) AS n
ON CONFLICT (id) DO NOTHING;
"""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    url = Settings().resolved_database_url
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(CREATE_WORLD)
    finally:
        await connection.close()
    async with asyncpg.create_pool(url) as pool:
        app.state.pool = pool
        yield


app = FastAPI(lifespan=lifespan)


@app.get("/db")
async def single_database_query() -> JSONResponse:
    row_id = random.randint(1, WORLD_ROWS)
    async with app.state.pool.acquire() as connection:
        number = await connection.fetchval(READ_NUMBER, row_id)
    return JSONResponse({"id": row_id, "randomNumber": number})
