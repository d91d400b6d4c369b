"""The naive keyset cursor: base64 of the last id, unsigned, as the first tasks app had it."""

from __future__ import annotations

import base64
import binascii

from tenk.platform import InvalidInputError


def encode_after(last_id: int) -> str:
    return base64.urlsafe_b64encode(str(last_id).encode()).decode()


def decode_after(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        last_id = int(base64.urlsafe_b64decode(cursor.encode()).decode())
    except (binascii.Error, ValueError, UnicodeError):
        raise InvalidInputError("cursor is not valid", field="query.after") from None
    if not 0 <= last_id < 2**63:
        raise InvalidInputError("cursor is not valid", field="query.after")
    return last_id
