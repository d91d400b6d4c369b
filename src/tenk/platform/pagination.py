"""Opaque, signed keyset cursors.

A cursor is base64url(payload || HMAC-SHA256(payload)[:12]). Clients cannot forge or edit one, so a
tampered cursor is a clean 422, never a query with surprising bounds. Even a correctly signed one is
checked for shape and range before it reaches Postgres: a leaked secret must not turn into 500s.

The secret is never a constant in the source. A deployment (TENK_API_KEYS set, or TENK_DEV_FALLBACK off as
in the image) must give TENK_CURSOR_SECRET, the same in every process: the settings refuse to start
without it, since replicas that each generated their own would refuse each other's cursors. In
development one is generated once per install into `<data_dir>/cursor-secret` (mode 0600), like the dev
API key, and every process of `tenk up` shares that data dir.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from tenk.platform.errors import InvalidInputError
from tenk.platform.lane import resolved
from tenk.settings import Settings

_MAC_BYTES = 12
MAX_CURSOR_CHARS = 512
SECRET_FILE = "cursor-secret"
# Positions are Postgres bigints: a signed cursor holding anything wider is refused here, not by Postgres.
_BIGINT = range(-(2**63), 2**63)


class CursorSecretMissingError(RuntimeError):
    """A deployment (TENK_API_KEYS set) without TENK_CURSOR_SECRET: refuse to start."""


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
        try:
            position = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise InvalidInputError("cursor is not valid", field=field) from None
        if (
            not isinstance(position, list)
            or len(position) != len(shape)
            or not all(_fits(value, kind) for value, kind in zip(position, shape, strict=True))
        ):
            raise InvalidInputError("cursor is not valid", field=field)
        return position


def _fits(value: object, kind: type) -> bool:
    if isinstance(value, bool) or not isinstance(value, kind):
        return False
    return value in _BIGINT if isinstance(value, int) else True


@lru_cache(maxsize=16)
def cursor_codec(secret: str, scope: str) -> CursorCodec:
    return CursorCodec(secret, scope)


def cursors(scope: str) -> Any:
    """The dependency that hands a route its resource's codec (in both lanes)."""
    return resolved(lambda state, _: cursor_codec(state.cursor_secret, scope))


def cursor_secret(settings: Settings) -> str:
    """TENK_CURSOR_SECRET; in development (no TENK_API_KEYS), this install's generated one."""
    if settings.cursor_secret:
        return settings.cursor_secret
    if settings.api_keys:
        raise CursorSecretMissingError(
            "TENK_API_KEYS is set but TENK_CURSOR_SECRET is not: set it to a long random string, "
            "the same for every API process (for example: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return _dev_secret(settings.data_dir)


def _dev_secret(data_dir: Path) -> str:
    path = data_dir / SECRET_FILE
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    # Written whole under a private name, then linked into place: a second worker starting at the
    # same moment either wins the link or reads the winner's complete secret, never a half-written one.
    fd, staged = tempfile.mkstemp(dir=data_dir, prefix=".cursor-secret-")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(staged, path)
    finally:
        os.unlink(staged)
    return path.read_text().strip()


def keyset_page(rows: list[Any], limit: int, codec: CursorCodec) -> bytes:
    """`{"items": [...], "next": cursor|null}` from rows of (id, json_text), fetched with LIMIT limit+1.

    The rows' JSON was rendered by Postgres; stitching it avoids a parse and a re-serialise.
    """
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = codec.encode([rows[-1][0]]) if more else None
    items = b",".join(row[1].encode() for row in rows)
    return b'{"items":[' + items + b'],"next":' + orjson.dumps(next_cursor) + b"}"
