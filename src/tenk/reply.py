"""The one answer type every route handler returns, whichever lane called it, and its one set of headers.

A handler returns a `Reply`: a status, JSON body bytes, and the headers those call for (Content-Type,
Content-Length, and Retry-After, Location or a 401's challenge when given). The edge writes them straight
onto the wire; FastAPI wraps them in a `Response` (`as_response`). Both take the headers the reply made,
so neither lane can add a header the other forgets.

The headers are made once, with the reply: a reply kept in a cache (a product's, `tenk.catalog.service`)
is written again and again without a new object or a header made anew.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response

JSON = "application/json"
Header = tuple[bytes, bytes]
_CONTENT_TYPE = (b"content-type", JSON.encode())
# RFC 9110 §11.6.1: a 401 must say how to authenticate.
_BEARER_CHALLENGE = (b"www-authenticate", b"Bearer")
CLOSE = (b"connection", b"close")


class Reply:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes, retry_after: int | None = None, location: str | None = None) -> None:
        self.status = status
        self.body = body
        headers = [_CONTENT_TYPE, (b"content-length", b"%d" % len(body))]
        if retry_after is not None:
            headers.append((b"retry-after", b"%d" % retry_after))
        if location is not None:
            headers.append((b"location", location.encode()))
        if status == 401:
            headers.append(_BEARER_CHALLENGE)
        self.headers: tuple[Header, ...] = tuple(headers)

    def __repr__(self) -> str:
        return f"Reply({self.status}, {self.body!r}, headers={self.headers!r})"


def as_response(reply: Reply) -> Response:
    response = Response(reply.body, reply.status)
    response.raw_headers = list(reply.headers)
    return response


def created(body: bytes, collection: str) -> Reply:
    """201 for a row just written, its `Location` taken from the row's own id (what the OpenAPI links follow)."""
    return Reply(201, body, location=f"{collection}/{orjson.loads(body)['id']}")
