"""A sync WSGI baseline for the search study (002). It exists only to be measured against: never deploy it.

The study compared Falcon 2 as a synchronous WSGI app with async FastAPI. This is plain WSGI under
gunicorn's sync workers (the lab picks the `sync` worker class for this target): each worker process
serves one request at a time, start to finish, on blocking drivers. Plain WSGI rather than Falcon: it
needs no new dependency, and a framework layer can only add work per request, so the sync side is
measured at its fastest and the comparison is the concurrency model's, not the framework's.

Routes: GET /health, /ping and /search (the search study's endpoint, the same query, ranking, validation
and error bodies as the FastAPI baselines). Knobs (env): NAIVE_POOL=1 (a connection pool per worker
process, opened on its first request, after gunicorn forked it), NAIVE_ACCESS_LOG=0.
Serve it: `gunicorn --worker-class sync tenk.lab.targets.baselines.wsgi_sync:app`.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Annotated, Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, Field, ValidationError
from starlette.responses import Response

from tenk.lab.targets.baselines import blocking_io as io
from tenk.lab.targets.baselines.access_log import configure_access_logger, log_request
from tenk.lab.targets.baselines.config import NaiveConfig
from tenk.lab.targets.baselines.errors import MAPPED_TYPES, driver_error_response
from tenk.platform import PgText
from tenk.platform.errors import TenkError, error_response, response_for, validation_fields

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
Environ = dict[str, Any]


class SearchParams(BaseModel):
    """The FastAPI baselines' /search query parameters, checked the same way."""

    q: Annotated[PgText, Field(min_length=1, max_length=200)]
    limit: Annotated[int, Field(ge=1, le=50)] = 10


_LOG_REQUESTS = NaiveConfig().access_log
if _LOG_REQUESTS:
    configure_access_logger()

_resources: io.Resources | None = None
_opening = threading.Lock()


def _process_resources(config: NaiveConfig) -> io.Resources:
    """This worker's pool, opened on first use: a pool opened before gunicorn forks would be shared."""
    global _resources
    with _opening:
        if _resources is None:
            _resources = io.Resources.open(config)
            atexit.register(_resources.close)
        return _resources


def _json(status: int, body: bytes) -> Response:
    return Response(body, status, media_type="application/json")


def _search(environ: Environ) -> Response:
    raw = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
    try:
        params = SearchParams.model_validate(raw)
    except ValidationError as exc:
        fields = [{**f, "field": f"query.{f['field']}"} for f in validation_fields(exc.errors())]
        return error_response(422, "validation_error", "the request is not valid", fields)
    config = NaiveConfig()
    with io.connect(_process_resources(config), config) as db:
        results = io.search(db, params.q, params.limit)
    return _json(200, results.model_dump_json().encode())


_ROUTES: dict[str, Callable[[Environ], Response]] = {
    "/health": lambda _: _json(200, b'{"status":"ok"}'),
    "/ping": lambda _: _json(200, b'{"ping":"pong"}'),
    "/search": _search,
}


def _respond(environ: Environ) -> Response:
    route = _ROUTES.get(environ.get("PATH_INFO", ""))
    if route is None:
        return error_response(404, "not_found", "Not Found")
    if environ.get("REQUEST_METHOD") != "GET":
        return error_response(405, "method_not_allowed", "Method Not Allowed")
    try:
        return route(environ)
    except TenkError as exc:
        return response_for(exc)
    except MAPPED_TYPES as exc:
        return driver_error_response(exc)


def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
    response = _respond(environ)
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
    start_response(f"{response.status_code} {HTTPStatus(response.status_code).phrase}", headers)
    if _LOG_REQUESTS:
        client = (environ.get("REMOTE_ADDR", "-"), int(environ.get("REMOTE_PORT") or 0))
        protocol = environ.get("SERVER_PROTOCOL", "HTTP/1.1").removeprefix("HTTP/")
        log_request(
            client, environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""),
            protocol, response.status_code,
        )  # fmt: skip
    return [bytes(response.body)]
