"""Error responses for the baselines: tenk's body shape, so a report can name why a request failed.

The message keeps the driver's own words ("sorry, too many clients already"): that reason is what the
pooling preset must show.
"""

from __future__ import annotations

import httpx
import psycopg
import psycopg_pool
from fastapi import FastAPI, Request
from redis.exceptions import RedisError
from starlette.responses import Response

from tenk.errors import error_response, install_error_handlers


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[-1][:300]


async def _database_down(_: Request, exc: Exception) -> Response:
    return error_response(503, "database_unavailable", _reason(exc), retry_after_s=1.0)


async def _pool_timeout(_: Request, exc: Exception) -> Response:
    return error_response(503, "pool_timeout", _reason(exc), retry_after_s=1.0)


async def _cache_down(_: Request, exc: Exception) -> Response:
    return error_response(503, "cache_unavailable", f"Cache error: {_reason(exc)}", retry_after_s=1.0)


async def _upstream_timeout(_: Request, exc: Exception) -> Response:
    return error_response(504, "upstream_timeout", _reason(exc))


async def _upstream_failed(_: Request, exc: Exception) -> Response:
    return error_response(502, "upstream_error", _reason(exc))


def install_baseline_error_handlers(app: FastAPI) -> None:
    install_error_handlers(app)
    app.add_exception_handler(psycopg.OperationalError, _database_down)
    app.add_exception_handler(psycopg_pool.PoolTimeout, _pool_timeout)
    app.add_exception_handler(RedisError, _cache_down)
    app.add_exception_handler(httpx.TimeoutException, _upstream_timeout)
    app.add_exception_handler(httpx.HTTPError, _upstream_failed)
