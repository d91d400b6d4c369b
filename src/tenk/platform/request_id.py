"""`X-Request-ID`: the client's, if it has a safe shape, or a new one; the edge echoes it (tenk.platform.edge)."""

from __future__ import annotations

import random
import re
from binascii import hexlify
from contextvars import ContextVar

from starlette.types import Scope

# Bytes, as the header carries it: decoded only when a log line is made (`tenk.ops.logging`), not on
# every request.
request_id_var: ContextVar[bytes | None] = ContextVar("tenk_request_id", default=None)

# A client-chosen id goes into our logs and back into a header: accept only a safe, bounded shape.
_ACCEPTABLE = re.compile(rb"^[A-Za-z0-9._:\-]{1,128}$")
HEADER = b"x-request-id"


def resolve_request_id(scope: Scope) -> bytes:
    for name, value in scope["headers"]:
        if name == HEADER:
            if _ACCEPTABLE.match(value):
                return bytes(value)
            break
    # 128 random bits as 32 hex digits, the shape of uuid4().hex. An id needs to be unique, not secret:
    # `random` (reseeded in every forked worker) draws it without the getrandom system call of
    # `os.urandom`, a system call on every request that `perf` showed in a served cached read. `hexlify`
    # of its 16 bytes is quicker than formatting the int with `%032x` (`timeit`).
    return hexlify(random.getrandbits(128).to_bytes(16))
