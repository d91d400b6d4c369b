"""The one answer type every route handler returns, whichever lane called it, and its one set of headers.

A handler returns (status, JSON body bytes, Retry-After seconds or None, Location or None). The edge writes those
straight onto the wire; FastAPI wraps them in a `Response` (`as_response`). Both take their headers
from `reply_headers`, so neither lane can add a header the other forgets.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson
from starlette.responses import Response

JSON = "application/json"
_CONTENT_TYPE = (b"content-type", JSON.encode())
# RFC 9110 §11.6.1: a 401 must say how to authenticate.
_BEARER_CHALLENGE = (b"www-authenticate", b"Bearer")
_CLOSE = (b"connection", b"close")


class Reply(NamedTuple):
    status: int
    body: bytes
    retry_after: int | None = None
    location: str | None = None


def reply_headers(reply: Reply, *, close: bool = False) -> list[tuple[bytes, bytes]]:
    """The headers of a reply; `close` when the request's body was left unread, so the connection is done."""
    headers = [_CONTENT_TYPE, (b"content-length", b"%d" % len(reply.body))]
    if reply.retry_after is not None:
        headers.append((b"retry-after", str(reply.retry_after).encode()))
    if reply.location is not None:
        headers.append((b"location", reply.location.encode()))
    if reply.status == 401:
        headers.append(_BEARER_CHALLENGE)
    if close:
        headers.append(_CLOSE)
    return headers


def as_response(reply: Reply) -> Response:
    response = Response(reply.body, reply.status)
    response.raw_headers = reply_headers(reply)
    return response


def created(body: bytes, collection: str) -> Reply:
    """201 for a row just written, its `Location` taken from the row's own id (what the OpenAPI links follow)."""
    return Reply(201, body, location=f"{collection}/{orjson.loads(body)['id']}")
