"""API-key auth: `Authorization: Bearer <key>`, checked against SHA-256 digests in constant time.

We store digests, not keys, so a leaked settings file does not leak a usable key.

Which routes need a key is declared once, on the route, by the dependency it lists: `require_writer`,
`require_reader`, `require_event_reader` or `require_ops_key(...)`. Each stands for a `KeyPolicy` that
says, from the settings, whether the key is needed; FastAPI runs the dependency, and the hot lane
(`tenk.platform.lane.derive`) reads the same policy off the same declaration, so the two lanes cannot disagree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tenk.ops.api_keys import bearer_key, digest, key_is_accepted
from tenk.platform.errors import ForbiddenError, UnauthorizedError

if TYPE_CHECKING:
    from tenk.settings import Settings

bearer_scheme = HTTPBearer(auto_error=False, description="An API key issued by `tenk up` or your operator.")

OpsEndpoint = Literal["metrics", "docs", "ready"]


def key_digest(key: str) -> str:
    """What an app stores of an API key: its SHA-256 hex digest (`TENK_API_KEYS`, `open_edge(accepted_digests=...)`)."""
    return digest(key)


def check_credentials(credentials: HTTPAuthorizationCredentials | None, accepted_digests: list[str]) -> None:
    if credentials is None or not credentials.credentials:
        raise UnauthorizedError("missing API key: send Authorization: Bearer <key>", field="header.authorization")
    if not key_is_accepted(credentials.credentials, accepted_digests):
        raise ForbiddenError("API key not accepted", field="header.authorization")


def check_authorization_header(value: bytes, accepted_digests: list[str]) -> None:
    """The same check on a raw `Authorization` header, for the hot lane."""
    key = bearer_key(value)
    credentials = None if key is None else HTTPAuthorizationCredentials(scheme="Bearer", credentials=key)
    check_credentials(credentials, accepted_digests)


@dataclass(frozen=True, slots=True)
class KeyPolicy:
    """Whether a route needs a key, decided from the settings (which do not change while the app runs)."""

    name: str
    needs_key: Callable[[Settings], bool]


def _ops_needs_key(endpoint: OpsEndpoint) -> Callable[[Settings], bool]:
    def needs_key(settings: Settings) -> bool:
        switch: bool | None = getattr(settings, f"auth_{endpoint}")
        # Unset: as the reads. An operator who locks reads down gets the ops endpoints locked with them.
        return settings.auth_reads if switch is None else switch

    return needs_key


WRITES = KeyPolicy("writer", lambda _: True)
READS = KeyPolicy("reader", lambda settings: settings.auth_reads)
# Stored events are the clients' data, not the catalogue's: private unless the operator says otherwise.
EVENT_READS = KeyPolicy("event reader", lambda settings: settings.auth_reads or settings.auth_events)

KeyCheck = Callable[[Request], Awaitable[None]]
# FastAPI dependency -> the policy it applies; the hot lane reads it from here.
KEY_POLICIES: dict[Callable[..., object], KeyPolicy] = {}


def key_check(policy: KeyPolicy) -> KeyCheck:
    """The route dependency that applies `policy`: list it in the route's `dependencies`."""

    async def check(request: Request) -> None:
        app_state = request.app.state
        # The edge's judge (`TenkAPI.open_edge(needs_key=...)`), which the hot lane asks too; else the tree's.
        needs_key = getattr(app_state, "key_needed", None)
        if needs_key(policy) if needs_key is not None else policy.needs_key(app_state.settings):
            check_credentials(await bearer_scheme(request), app_state.accepted_key_digests)

    check.__name__ = f"require_{policy.name.replace(' ', '_')}"
    KEY_POLICIES[check] = policy
    return check


require_writer = key_check(WRITES)
"""Dependency for every write route."""
require_reader = key_check(READS)
"""Dependency for read routes; a no-op unless TENK_AUTH_READS is on."""
require_event_reader = key_check(EVENT_READS)
"""Dependency for reads of stored events; a no-op only with TENK_AUTH_EVENTS=false and reads public."""

OPS_POLICIES: dict[OpsEndpoint, KeyPolicy] = {
    endpoint: KeyPolicy(f"{endpoint} reader", _ops_needs_key(endpoint)) for endpoint in ("metrics", "docs", "ready")
}
_OPS_CHECKS = {endpoint: key_check(policy) for endpoint, policy in OPS_POLICIES.items()}


def require_ops_key(endpoint: OpsEndpoint) -> KeyCheck:
    """Dependency for an ops endpoint: TENK_AUTH_<ENDPOINT>, or TENK_AUTH_READS when that is unset."""
    return _OPS_CHECKS[endpoint]
