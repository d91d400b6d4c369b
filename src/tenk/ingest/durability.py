"""Accepted events are only as safe as Redis's AOF policy: the API checks it, it never sets it.

TENK_INGEST_DURABILITY names the fsync policy the 202s promise. The embedded Redis is started with it
in its config file (`tenk up`); a production Redis is configured by whoever runs it. A policy set from
here with CONFIG SET would not survive the next Redis restart, so instead the API verifies it: at
start-up and again whenever it finds a different Redis server run behind the same address (its
`run_id` changes on every restart). When the policy does not hold, the log says so loudly and
`/ready` reports `degraded`. A managed Redis that disables CONFIG cannot be verified: the log and
`/ready` say that instead of pretending.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoPermissionError, ResponseError

from tenk.ingest.settings import Durability
from tenk.platform import REDIS_DOWN, reply_text

logger = logging.getLogger("tenk.ingest.durability")

# Stronger policies satisfy weaker promises: `always` fsyncs more often than `everysec` asks.
# `replicated` asks for `everysec` on the master; each append then waits for a replica itself.
_SATISFIES: dict[Durability, set[str]] = {
    "everysec": {"everysec", "always"},
    "always": {"always"},
    "replicated": {"everysec", "always"},
}
WATCH_EVERY_S = 1.0


class DurabilityNotHeldError(RuntimeError):
    """Redis's AOF settings are weaker than TENK_INGEST_DURABILITY promises."""


class DurabilityGuard:
    def __init__(self, redis: Redis, wanted: Durability) -> None:
        self.redis = redis
        self.wanted = wanted
        self._run_id: str | None = None
        self._last_outcome: str | None = None

    async def verify(self) -> str:
        """What holds, as one line; raises DurabilityNotHeldError when the promise is broken."""
        try:
            raw: dict[Any, Any] = await self.redis.config_get("append*")
        except (NoPermissionError, ResponseError) as exc:
            # Managed services rename or forbid CONFIG (and ACLs may too): we cannot know.
            return self._report(
                f"unverified: CONFIG is unavailable on this Redis ({exc}); make sure it runs with "
                f"appendonly yes and appendfsync {self.wanted}, as TENK_INGEST_DURABILITY promises",
                logging.WARNING,
            )
        config = {reply_text(key): reply_text(value) for key, value in raw.items()}
        appendonly, appendfsync = config.get("appendonly"), config.get("appendfsync")
        if appendonly != "yes" or appendfsync not in _SATISFIES[self.wanted]:
            problem = (
                f"redis runs with appendonly {appendonly} and appendfsync {appendfsync}, but "
                f"TENK_INGEST_DURABILITY={self.wanted}: accepted events can be lost if Redis crashes. "
                "Start Redis with the setting in its config (`tenk up` does for the embedded one)"
            )
            self._report(problem, logging.ERROR)
            raise DurabilityNotHeldError(problem)
        return self._report(f"appendonly yes, appendfsync {appendfsync}", logging.INFO)

    def _report(self, outcome: str, level: int) -> str:
        if outcome != self._last_outcome:
            logger.log(level, "redis durability: %s", outcome)
            self._last_outcome = outcome
        return outcome

    async def watch(self) -> None:
        """Re-verify whenever the Redis behind the address is a new server run (a restart, a failover)."""
        while True:
            try:
                info: dict[str, Any] = await self.redis.info("server")
                run_id = reply_text(info.get("run_id"))
                if run_id != self._run_id:
                    self._run_id = run_id
                    await self.verify()
            except DurabilityNotHeldError:
                pass
            except REDIS_DOWN as exc:
                logger.debug("redis durability unverifiable while redis is down: %s", exc)
            # redis-py can swallow a cancellation that arrives mid-command (the command then returns or
            # fails as usual): a cancelled watcher must still stop, or the lifespan waits on it forever.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError
            await asyncio.sleep(WATCH_EVERY_S)
