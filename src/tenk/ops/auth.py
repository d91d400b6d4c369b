"""API-key auth: `Authorization: Bearer <key>`, checked against SHA-256 digests in constant time.

We store digests, not keys, so a leaked settings file does not leak a usable key.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tenk.errors import ForbiddenError, UnauthorizedError
from tenk.ops.api_keys import key_is_accepted

bearer_scheme = HTTPBearer(auto_error=False, description="An API key issued by `tenk up` or your operator.")


def check_credentials(credentials: HTTPAuthorizationCredentials | None, accepted_digests: list[str]) -> None:
    if credentials is None or not credentials.credentials:
        raise UnauthorizedError("missing API key: send Authorization: Bearer <key>", field="header.authorization")
    if not key_is_accepted(credentials.credentials, accepted_digests):
        raise ForbiddenError("API key not accepted", field="header.authorization")


def check_authorization_header(value: bytes, accepted_digests: list[str]) -> None:
    """The same check on a raw `Authorization` header, for the hot lane."""
    scheme, _, key = value.decode("latin-1").partition(" ")
    credentials = None
    if scheme.lower() == "bearer" and key.strip():
        credentials = HTTPAuthorizationCredentials(scheme=scheme, credentials=key.strip())
    check_credentials(credentials, accepted_digests)


async def require_writer(request: Request) -> None:
    """Dependency for every write route."""
    check_credentials(await bearer_scheme(request), request.app.state.accepted_key_digests)


async def require_reader(request: Request) -> None:
    """Dependency for read routes; a no-op unless TENK_AUTH_READS is on."""
    settings = request.app.state.settings
    if settings.auth_reads:
        check_credentials(await bearer_scheme(request), request.app.state.accepted_key_digests)
