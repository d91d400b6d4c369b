"""Error responses for the baselines: tenk's body shape, so a report can name why a request failed.

The message keeps the driver's own words ("sorry, too many clients already"): that reason is what the
pooling preset must show. The FastAPI baselines and the WSGI one map exceptions through the same table.
"""

from __future__ import annotations

import httpx
import psycopg
import psycopg_pool
from fastapi import FastAPI, Request
from redis.exceptions import RedisError
from starlette.responses import Response

from tenk.platform.errors import error_response, install_error_handlers

# Most specific first: a PoolTimeout is also an OperationalError, an httpx timeout also an HTTPError.
_MAPPED: tuple[tuple[type[Exception], int, str, str, float | None], ...] = (
    (psycopg_pool.PoolTimeout, 503, "pool_timeout", "", 1.0),
    (psycopg.OperationalError, 503, "database_unavailable", "", 1.0),
    (RedisError, 503, "cache_unavailable", "Cache error: ", 1.0),
    (httpx.TimeoutException, 504, "upstream_timeout", "", None),
    (httpx.HTTPError, 502, "upstream_error", "", None),
)
MAPPED_TYPES = tuple(kind for kind, *_ in _MAPPED)


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[-1][:300]


def driver_error_response(exc: Exception) -> Response:
    """The response for a driver's exception; only call it with one of MAPPED_TYPES."""
    for kind, status, code, prefix, retry_after_s in _MAPPED:
        if isinstance(exc, kind):
            return error_response(status, code, prefix + _reason(exc), retry_after_s=retry_after_s)
    raise TypeError(f"not a driver error: {exc!r}")


async def _on_driver_error(_: Request, exc: Exception) -> Response:
    return driver_error_response(exc)


def install_baseline_error_handlers(app: FastAPI) -> None:
    install_error_handlers(app)
    for kind in MAPPED_TYPES:
        app.add_exception_handler(kind, _on_driver_error)
