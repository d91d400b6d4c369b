"""The one answer type every route handler returns, whichever lane called it, and its one set of headers.

A handler returns a `Reply`: a status, body bytes, and the headers those call for (Content-Type and
Content-Length, none for a 204; Retry-After, Location, a 401's challenge and any extra headers when
given). The edge writes them straight onto the wire; FastAPI wraps them in a `Response` (`as_response`,
through the endpoint `tenk.platform.lane.declare.replying` makes). Both take the headers the reply made,
so neither lane can add a header the other forgets.

The headers are made once, with the reply: a reply kept in a cache (a product's, `tenk.catalog.service`)
is written again and again without a new object or a header made anew.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson
from starlette.responses import Response

JSON = "application/json"
Header = tuple[bytes, bytes]
_CONTENT_TYPE = (b"content-type", JSON.encode())
# RFC 9110 §11.6.1: a 401 must say how to authenticate.
_BEARER_CHALLENGE = (b"www-authenticate", b"Bearer")
# RFC 9110 §6.4.1: these answers have no content, so neither a type nor a length (as Starlette's `Response`).
_BODILESS = frozenset({204, 304})
CLOSE = (b"connection", b"close")


class Reply:
    """`Reply(200, body)` is JSON; `media_type` names another type (`text/plain`), `headers` adds
    (name, value) pairs after the ones the reply makes, and a 204 or 304 has no body and no type."""

    __slots__ = ("body", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        retry_after: int | None = None,
        location: str | None = None,
        *,
        media_type: str = JSON,
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.status = status
        self.body = body
        if status in _BODILESS or status < 200:
            if body:
                raise ValueError(f"a {status} answer has no body")
            made: list[Header] = []
        else:
            content_type = _CONTENT_TYPE if media_type is JSON else (b"content-type", media_type.encode())
            made = [content_type, (b"content-length", b"%d" % len(body))]
        if retry_after is not None:
            made.append((b"retry-after", b"%d" % retry_after))
        if location is not None:
            made.append((b"location", location.encode()))
        if status == 401:
            made.append(_BEARER_CHALLENGE)
        if headers:
            made += ((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers)
        self.headers: tuple[Header, ...] = tuple(made)

    def __repr__(self) -> str:
        return f"Reply({self.status}, {self.body!r}, headers={self.headers!r})"


def as_response(reply: Reply) -> Response:
    response = Response(reply.body, reply.status)
    response.raw_headers = list(reply.headers)
    return response


def created(body: bytes, collection: str) -> Reply:
    """201 for a row just written, its `Location` taken from the row's own id (what the OpenAPI links follow)."""
    return Reply(201, body, location=f"{collection}/{orjson.loads(body)['id']}")


def no_content() -> Reply:
    """204: done, nothing to say (a delete)."""
    return _NO_CONTENT


_NO_CONTENT = Reply(204)
