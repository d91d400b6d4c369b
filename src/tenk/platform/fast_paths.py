"""The one place that decides whether a fast path built on a library's private internals runs.

Each fast path has a stock twin that uses only the library's public API:

- `hot_lane`: the lane (`tenk.platform.lane`) reads `fastapi._compat.ModelField`, `APIRoute._embed_body_fields`,
  pydantic's `_PydanticGeneralMetadata` and starlette's `State._state`; its twin is FastAPI's own routing.
- `pg_pool`: `PromptPool` (`tenk.platform.pg_pool`) gives a connection back through asyncpg's holders and
  protocol; its twin is `asyncpg.create_pool`.
- `redis_pool`: `PromptConnectionPool` (`tenk.platform.redis_pool`) takes and gives back through
  `BlockingConnectionPool`'s lists and maintenance state; its twin is that pool itself.
- `metrics`: the per-request writes (`tenk.platform.metrics`) go to prometheus_client's `_value`, `_buckets`
  and `_upper_bounds`; the twin is the children's own `inc` and `observe`.

A fast path runs unless `TENK_STOCK_PATHS` is on, or a library it reads is installed at a version outside
`TESTED`: the range CI runs the suite on (the lowest the dependencies allow, `make test-lowest`, and the newest
`uv.lock` holds, `make test`; `make test-stock` runs the twins). Outside it, tenk logs one warning naming the
library and its version and serves through the twin: an upgrade can make tenk slower, never wrong.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from enum import StrEnum
from functools import cache

logger = logging.getLogger("tenk.fast_paths")


class FastPath(StrEnum):
    HOT_LANE = "hot_lane"
    PG_POOL = "pg_pool"
    REDIS_POOL = "redis_pool"
    METRICS = "metrics"


# The distributions whose private names each fast path reads.
READS: dict[FastPath, tuple[str, ...]] = {
    FastPath.HOT_LANE: ("fastapi", "starlette", "pydantic"),
    FastPath.PG_POOL: ("asyncpg",),
    FastPath.REDIS_POOL: ("redis",),
    FastPath.METRICS: ("prometheus-client",),
}

# distribution -> (lowest, below): the versions the fast paths are tested on, lowest included. The lowest is
# pyproject's lower bound; "below" is the minor release after the newest in uv.lock (a patch release keeps
# private names as they were more often than not, and CI tests the newest patch of that minor on relock).
TESTED: dict[str, tuple[str, str]] = {
    "fastapi": ("0.138", "0.166"),
    "starlette": ("0.52", "1.11"),
    "pydantic": ("2.10", "2.15"),
    "asyncpg": ("0.32", "0.33"),
    "redis": ("8.1", "8.2"),
    "prometheus-client": ("0.21", "0.27"),
}


def runs(path: FastPath, *, stock_paths: bool) -> bool:
    """Whether `path` serves, rather than its stock twin: not with `stock_paths`, nor when a library it reads
    is outside its tested range."""
    return not stock_paths and all(in_tested_range(distribution) for distribution in READS[path])


@cache
def in_tested_range(distribution: str) -> bool:
    """Whether the installed `distribution` is within `TESTED`; warns once per process when it is not."""
    installed = importlib.metadata.version(distribution)
    lowest, below = TESTED[distribution]
    if release(lowest) <= release(installed) < release(below):
        return True
    logger.warning(
        "%s %s is outside the versions tenk's fast paths are tested on (>=%s,<%s): serving through its stock path",
        distribution,
        installed,
        lowest,
        below,
    )
    return False


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version (`1.10.0rc1` -> (1, 10, 0)): a pre-release counts as its release."""
    match = re.match(r"\d+(\.\d+)*", version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(part) for part in match.group().split("."))
