"""The error tree and the one place that turns it into HTTP responses.

    TenkError                     status  code
    ├── NotFoundError             404     not_found
    ├── ConflictError             409     conflict
    ├── InvalidInputError         422     invalid_input      (names the field)
    ├── PayloadTooLargeError      413     payload_too_large
    ├── RequestTimeoutError       408     request_timeout    (the body did not arrive in time)
    ├── ClientDisconnectedError   400     client_disconnected (the client left before its body arrived)
    ├── MalformedPathError        400     malformed_path     (a control character in the path; names it)
    ├── UnauthorizedError         401     unauthorized
    ├── ForbiddenError            403     forbidden
    └── UnavailableError          503     unavailable        (sets Retry-After)
        └── UpstreamTimeoutError  504     upstream_timeout

Every error body has the same shape:
    {"error": {"code": "...", "message": "...", "fields": [{"field": "query.limit", "message": "..."}]}}
"""

from __future__ import annotations

import logging
import math
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from tenk.platform.outages import POSTGRES_ERRORS, postgres_is_down
from tenk.platform.reply import Reply, as_response
from tenk.platform.resilience import BulkheadFullError, CircuitOpenError

logger = logging.getLogger("tenk.errors")


class TenkError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str, *, field: str | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s


class NotFoundError(TenkError):
    status, code = 404, "not_found"


class ConflictError(TenkError):
    status, code = 409, "conflict"


class InvalidInputError(TenkError):
    status, code = 422, "invalid_input"


class PayloadTooLargeError(TenkError):
    status, code = 413, "payload_too_large"


class RequestTimeoutError(TenkError):
    status, code = 408, "request_timeout"


class ClientDisconnectedError(TenkError):
    status, code = 400, "client_disconnected"


class MalformedPathError(TenkError):
    status, code = 400, "malformed_path"


class UnauthorizedError(TenkError):
    status, code = 401, "unauthorized"


class ForbiddenError(TenkError):
    status, code = 403, "forbidden"


class UnavailableError(TenkError):
    status, code = 503, "unavailable"


class UpstreamTimeoutError(UnavailableError):
    status, code = 504, "upstream_timeout"


CLIENT_LEFT = "the client disconnected before its body arrived"


def error_body(code: str, message: str, fields: list[dict[str, str]] | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return orjson.dumps({"error": error})


def error_reply(
    status: int,
    code: str,
    message: str,
    fields: list[dict[str, str]] | None = None,
    retry_after_s: float | None = None,
) -> Reply:
    retry_after = max(1, math.ceil(retry_after_s)) if retry_after_s is not None else None
    return Reply(status, error_body(code, message, fields), retry_after)


def error_response(
    status: int,
    code: str,
    message: str,
    fields: list[dict[str, str]] | None = None,
    retry_after_s: float | None = None,
) -> Response:
    return as_response(error_reply(status, code, message, fields, retry_after_s))


def _field_name(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def validation_fields(errors: Any) -> list[dict[str, str]]:
    return [{"field": _field_name(tuple(e.get("loc", ()))), "message": str(e.get("msg", "invalid"))} for e in errors]


async def _on_validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    fields = validation_fields(exc.errors())
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return error_response(422, "malformed_json", "the request body is not valid JSON", fields)
    return error_response(422, "validation_error", "the request is not valid", fields)


async def _on_http_exception(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(exc.status_code, "http_error")
    response = error_response(exc.status_code, code, str(exc.detail))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def reply_for(exc: Exception) -> Reply:
    """The answer to any exception a handler may raise, in either lane; a 500 only for true bugs."""
    if isinstance(exc, TenkError):
        fields = [{"field": exc.field, "message": exc.message}] if exc.field else None
        return error_reply(exc.status, exc.code, exc.message, fields, exc.retry_after_s)
    if isinstance(exc, CircuitOpenError):
        return error_reply(503, "circuit_open", str(exc), retry_after_s=exc.retry_after_s or 1.0)
    if isinstance(exc, BulkheadFullError):
        return error_reply(503, "overloaded", str(exc), retry_after_s=1.0)
    if isinstance(exc, ClientDisconnect):
        # The client went away (or the edge answered in the app's place): nobody reads this.
        return reply_for(ClientDisconnectedError(CLIENT_LEFT))
    if postgres_is_down(exc):
        logger.warning("database unavailable: %s", exc.__class__.__name__)
        return error_reply(503, "database_unavailable", "the database is unavailable", retry_after_s=2.0)
    logger.exception("unhandled error", exc_info=exc)
    return error_reply(500, "internal", "internal server error")


def response_for(exc: Exception) -> Response:
    """`reply_for` as a FastAPI response."""
    return as_response(reply_for(exc))


async def _on_exception(_: Request, exc: Exception) -> Response:
    return response_for(exc)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    # Whole families are routed to `response_for`, which tells "Postgres is down" (503) from a bug (500).
    for exc_type in (TenkError, CircuitOpenError, BulkheadFullError, ClientDisconnect, *POSTGRES_ERRORS, Exception):
        app.add_exception_handler(exc_type, _on_exception)
