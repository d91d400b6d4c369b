"""How the mock vendor behaves: a lognormal delay fixed by its median and 99th percentile, plus shares
of 500s and of requests that are never answered.

A lognormal is the usual shape of a remote API's latency: most calls near the median, a long right
tail. Given p50 and p99, mu = ln(p50) and sigma = ln(p99 / p50) / z(0.99).

    profile = Profile(p50_ms=40, p99_ms=400)
    draw = Sampler(profile, seed=1).draw()   # Draw(delay_s=0.031, outcome=Outcome.OK)
"""

from __future__ import annotations

import enum
import math
import random
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple, cast

# pydantic validates a TypedDict only from typing_extensions before Python 3.12 (pydantic depends on it).
from typing_extensions import TypedDict

# The standard normal's 99th percentile.
Z99 = 2.3263478740408408


class Outcome(enum.Enum):
    OK = "ok"
    ERROR = "error"
    HANG = "hang"


class Draw(NamedTuple):
    delay_s: float
    outcome: Outcome


class ProfileValues(TypedDict):
    """A profile as PUT /admin/latency answers it, and as GET /stats reports it."""

    p50_ms: float
    p99_ms: float
    error_rate: float
    hang_rate: float


class ProfileError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Profile:
    p50_ms: float = 40.0
    p99_ms: float = 400.0
    error_rate: float = 0.0
    hang_rate: float = 0.0

    def __post_init__(self) -> None:
        for name in ("p50_ms", "p99_ms"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ProfileError(name, "must be a finite number >= 0")
        if self.p99_ms < self.p50_ms:
            raise ProfileError("p99_ms", "must be >= p50_ms")
        for name in ("error_rate", "hang_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ProfileError(name, "must be between 0 and 1")
        if self.error_rate + self.hang_rate > 1.0:
            raise ProfileError("hang_rate", "error_rate + hang_rate must be <= 1")

    def updated(self, changes: dict[str, Any]) -> Profile:
        """A copy with some fields changed; unknown or non-numeric fields raise ProfileError."""
        values: dict[str, float] = {}
        for name, value in changes.items():
            if name not in _FIELDS:
                raise ProfileError(name, "unknown field")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ProfileError(name, "must be a number")
            values[name] = float(value)
        p50 = values.get("p50_ms", self.p50_ms)
        # Lowering only p50 below the old p99, or raising only p50 above it, should just work:
        # a p50 alone moves p99 with it so that the spread stays the same.
        if "p50_ms" in values and "p99_ms" not in values and self.p50_ms > 0:
            values["p99_ms"] = p50 * (self.p99_ms / self.p50_ms)
        elif "p50_ms" in values and "p99_ms" not in values:
            values["p99_ms"] = max(p50, self.p99_ms)
        return replace(self, **values)

    def as_dict(self) -> ProfileValues:
        return cast(ProfileValues, asdict(self))  # the dataclass's fields are ProfileValues' keys


_FIELDS = frozenset(("p50_ms", "p99_ms", "error_rate", "hang_rate"))


class Sampler:
    """Draws (delay, outcome) pairs; the same seed gives the same sequence."""

    def __init__(self, profile: Profile, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self.profile = profile

    @property
    def profile(self) -> Profile:
        return self._profile

    @profile.setter
    def profile(self, profile: Profile) -> None:
        self._profile = profile
        self._mu = math.log(profile.p50_ms / 1000) if profile.p50_ms > 0 else 0.0
        self._sigma = math.log(profile.p99_ms / profile.p50_ms) / Z99 if profile.p50_ms > 0 else 0.0

    def draw(self) -> Draw:
        profile = self._profile
        roll = self._random.random()
        if roll < profile.hang_rate:
            return Draw(math.inf, Outcome.HANG)
        outcome = Outcome.ERROR if roll < profile.hang_rate + profile.error_rate else Outcome.OK
        if profile.p50_ms <= 0:
            return Draw(0.0, outcome)
        if self._sigma == 0:
            return Draw(profile.p50_ms / 1000, outcome)
        return Draw(self._random.lognormvariate(self._mu, self._sigma), outcome)
