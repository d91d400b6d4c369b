"""API keys as tenk stores them: SHA-256 digests, compared in constant time.

We store digests, not keys, so a leaked settings file does not leak a usable key. A leaf, with no web
framework in it: the settings (the dev key's digest), `tenk up` and the tests use it without the app.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_api_key() -> str:
    return "tk_" + secrets.token_urlsafe(32)


def bearer_key(authorization: bytes) -> str | None:
    """The key of a raw `Authorization: Bearer <key>` header, or None."""
    scheme, _, key = authorization.decode("latin-1").partition(" ")
    key = key.strip()
    return key if scheme.lower() == "bearer" and key else None


def key_is_accepted(key: str, accepted_digests: list[str]) -> bool:
    presented = digest(key).encode()
    matched = False
    # No early exit: the time taken must not tell which digest, if any, matched.
    for accepted in accepted_digests:
        matched |= hmac.compare_digest(presented, accepted.encode())
    return matched
