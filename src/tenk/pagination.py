"""Opaque, signed keyset cursors.

A cursor is base64url(payload || HMAC-SHA256(payload)[:12]). Clients cannot forge or edit one, so a
tampered cursor is a clean 422, never a query with surprising bounds.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from functools import lru_cache
from typing import Any

import orjson

from tenk.errors import InvalidInputError

_MAC_BYTES = 12
MAX_CURSOR_CHARS = 512


class CursorCodec:
    def __init__(self, secret: str, scope: str) -> None:
        # The scope keeps a tasks cursor from being replayed against products.
        self._key = hashlib.sha256(f"{scope}\x00{secret}".encode()).digest()

    def encode(self, position: list[object]) -> str:
        payload = orjson.dumps(position)
        mac = hmac.digest(self._key, payload, "sha256")[:_MAC_BYTES]
        return base64.urlsafe_b64encode(payload + mac).rstrip(b"=").decode()

    def decode(self, cursor: str, shape: tuple[type, ...], field: str = "query.after") -> list[Any]:
        """The position the cursor encodes; it must match `shape` (one type per element)."""
        if len(cursor) > MAX_CURSOR_CHARS:
            raise InvalidInputError("cursor is too long", field=field)
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            raise InvalidInputError("cursor is not valid", field=field) from None
        payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        if len(raw) <= _MAC_BYTES or not hmac.compare_digest(
            mac, hmac.digest(self._key, payload, "sha256")[:_MAC_BYTES]
        ):
            raise InvalidInputError("cursor is not valid", field=field)
        position = orjson.loads(payload)
        if (
            not isinstance(position, list)
            or len(position) != len(shape)
            or not all(
                isinstance(value, kind) and not isinstance(value, bool)
                for value, kind in zip(position, shape, strict=True)
            )
        ):
            raise InvalidInputError("cursor is not valid", field=field)
        return position


@lru_cache(maxsize=16)
def cursor_codec(secret: str, scope: str) -> CursorCodec:
    return CursorCodec(secret, scope)


def keyset_page(rows: list[Any], limit: int, codec: CursorCodec) -> bytes:
    """`{"items": [...], "next": cursor|null}` from rows of (id, json_text), fetched with LIMIT limit+1.

    The rows' JSON was rendered by Postgres; stitching it avoids a parse and a re-serialise.
    """
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = codec.encode([rows[-1][0]]) if more else None
    items = b",".join(row[1].encode() for row in rows)
    return b'{"items":[' + items + b'],"next":' + orjson.dumps(next_cursor) + b"}"
