"""Invalidations that are never lost: a Postgres outbox, delivered to Redis until confirmed.

Invariant: once a write to a cached table has committed, every cached copy of the old row (Redis, and
each process's LRU) is dropped, however long Redis is full, unreachable or restarting, and even if the
process that wrote dies right after its commit.

How:
- Record. A trigger on the table (`ReadThrough.outbox_sql`, the catalog's is migration 0003) writes a
  row to `<name>_invalidations` in the same transaction as the change, whichever path made it. Nothing
  can commit a change without its invalidation record, and a crash cannot separate the two.
- Deliver. Right after its commit the writer runs the invalidation script (`_keys.INVALIDATE`: DEL the
  cached copy, INCR the item's generation, publish the id: see `tenk.platform.pubsub`) and then deletes the
  record, but only the record it saw: `seq` changes when a newer write re-arms it, and that one must be
  delivered anew.
- Replay. Every API process drains the outbox every `REPLAY_EVERY_S`, and once at start-up before it
  serves, so records a writer could not deliver (Redis down, the writer killed) go out as soon as
  Redis can take them. Deliveries are idempotent: two processes replaying one record is harmless.
- A full Redis. At maxmemory with `noeviction` Redis refuses a MULTI whole, DEL included. The script
  is refused only if its first write needs memory, and its first write is a DEL (see `_keys.py`), so
  the invalidation goes through when Redis is full. Fills (`FILL_IF_UNCHANGED`) start with a SET and
  are refused while Redis is full. When Redis has room again, a fill that read Postgres before the
  write still carries the generation it saw before the INCR, and is refused: the old row cannot come
  back.
- Redis unreachable at write time: the record waits in Postgres; the replay that delivers it bumps
  the generation, which refuses every fill started before it and deletes whatever such a fill stored.
- Confirmed. A writer's answer waits, up to `ack_timeout_s` (the cache's `invalidation_ack_timeout_s`),
  until every process subscribed to invalidations has confirmed that it dropped its copy
  (`tenk.platform.pubsub` receipts), so a read through any other process right after the answer cannot get the
  old row. Past the bound the write still answers (it has committed), the timeout is counted
  (`tenk_<name>_invalidation_ack_timeouts_total`) and logged: a process that did not confirm in time
  (stopped, starved, partitioned) drops its copy when the message reaches it, or when its listener
  re-subscribes (it then drops everything), and at the latest when its copy's TTL ends. Replays wait for
  nobody: no one is waiting on them.
- Read replicas. Each delivery also records the primary's WAL position after the write (read after
  the commit, so past it): a miss reads a replica only once it has replayed that far
  (`_replicas.py`), so a lagging replica cannot put the old row back after the invalidation.
- No Redis (a local-only cache). Delivering is dropping this process's copy (`forget`); the records
  are still read, delivered and settled, so writes made elsewhere (psql, a seed) reach this process
  within `REPLAY_EVERY_S`. Other processes hear only of the records they replay themselves.
- No outbox (a cache declared with `outbox=False`): `after_write` delivers, and nothing is recorded or
  replayed, so a write that skips `ReadCache.invalidate` is seen when the copies' TTLs end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import asyncpg
from redis.asyncio import Redis

from tenk.platform.outages import POSTGRES_ERRORS, REDIS_DOWN
from tenk.platform.pubsub import Broadcast, Receipt
from tenk.platform.readthrough._keys import GENERATION_TTL_S, INVALIDATE, KeySpace
from tenk.platform.readthrough._metrics import CacheMetrics
from tenk.platform.readthrough._sql import OutboxSql

logger = logging.getLogger("tenk.platform.readthrough.invalidation")

REPLAY_EVERY_S = 0.5
# Items per script call when draining a backlog (a bulk load can leave one record per item).
REPLAY_BATCH = 500
# Script calls in flight at once while delivering many items (one call per slot).
_SLOTS_AT_ONCE = 16
# A stuck process makes every write time out: say so once in a while, not once per write.
_WARN_EVERY_S = 10.0


class Invalidator:
    def __init__(
        self,
        pg: asyncpg.Pool,
        redis: Redis | None,
        keys: KeySpace,
        outbox: OutboxSql | None,
        metrics: CacheMetrics,
        forget: Callable[[int], None],
        *,
        track_lsn: bool = False,
        ack_timeout_s: float = 0.0,
    ) -> None:
        self.pg = pg
        self.redis = redis
        self.keys = keys
        self.outbox = outbox
        self.metrics = metrics
        self._forget = forget
        # Only read replicas need the written LSN; without them it would be a key per write for nothing.
        self.track_lsn = track_lsn
        self.ack_timeout_s = ack_timeout_s
        self.broadcast: Broadcast | None = None
        if redis is not None:
            self._script = redis.register_script(INVALIDATE)
            self.broadcast = Broadcast(redis, keys.channel)
        self._timeouts_unreported = 0
        self._warned_at: float | None = None

    async def after_write(self, item_id: int) -> None:
        """Deliver the invalidation a committed write recorded, and wait (boundedly) until every process
        has dropped its copy. Never raises for an outage: an undelivered record stays in the outbox for
        the replay."""
        if self.ack_timeout_s <= 0 or self.broadcast is None:
            await self._after_write(item_id, None)
            return
        with self.broadcast.receipt() as receipt:
            await self._after_write(item_id, receipt)

    async def _after_write(self, item_id: int, receipt: Receipt | None) -> None:
        # Unread (Postgres failed us): the record stays unsettled, and the replay delivers it again
        # within REPLAY_EVERY_S with the position it reads then.
        seq: int | None = None
        lsn = 0
        if self.outbox is not None:
            try:
                row = await self.pg.fetchrow(self.outbox.pending_one, item_id)
                seq, lsn = row["seq"], row["lsn"]
            except POSTGRES_ERRORS as exc:
                logger.warning("could not read the invalidation record of %s %s (%s)", self.keys.item, item_id, exc)
        try:
            receivers = await self.deliver([item_id], lsn, receipt)
        except REDIS_DOWN as exc:
            self.metrics.invalidation_failures.inc()
            logger.warning(
                "redis invalidation of %s %s failed (%s); the outbox will replay it", self.keys.item, item_id, exc
            )
            return
        if self.outbox is not None and seq is not None:
            try:
                await self.pg.execute(self.outbox.settle, [item_id], [seq])
            except POSTGRES_ERRORS as exc:
                logger.warning("delivered invalidation of %s %s stays recorded (%s)", self.keys.item, item_id, exc)
        # Confirmations that came during the settle are already counted.
        if receipt is not None and not await receipt.wait(receivers, self.ack_timeout_s):
            self._report_timeout(item_id, receipt.confirmed, receivers)

    def _report_timeout(self, item_id: int, confirmed: int, receivers: int) -> None:
        self.metrics.invalidation_ack_timeouts.inc()
        self._timeouts_unreported += 1
        now = time.monotonic()
        if self._warned_at is not None and now - self._warned_at < _WARN_EVERY_S:
            return
        logger.warning(
            "invalidation of %s %s: %d of %d processes confirmed within %.3fs; answered anyway "
            "(%d such writes since the last warning). A process that has not confirmed may serve the old "
            "row until the message reaches it.",
            self.keys.item,
            item_id,
            confirmed,
            receivers,
            self.ack_timeout_s,
            self._timeouts_unreported,
        )
        self._warned_at = now
        self._timeouts_unreported = 0

    async def deliver(self, item_ids: Sequence[int], lsn: int = 0, receipt: Receipt | None = None) -> int:
        """Drop the items from Redis, bump their generations, record `lsn` (the primary's WAL position
        after their writes) and tell every process, asking each to confirm on `receipt` when given.
        How many confirmations that makes (receivers, summed over the items).

        One script per slot (a script may not cross slots on a cluster), all at once; the publish that
        could not happen inside them (sharded pub/sub) follows only once every one has returned.
        Without Redis: drop this process's copies, and no one confirms.
        """
        if not item_ids:
            return 0
        if self.broadcast is None:
            for item_id in item_ids:
                self._forget(item_id)
            return 0
        broadcast = self.broadcast
        message = {item_id: broadcast.request(str(item_id), receipt) for item_id in item_ids}
        by_slot: defaultdict[int, list[int]] = defaultdict(list)
        for item_id in item_ids:
            by_slot[self.keys.slot(item_id)].append(item_id)
        ttl_ms = GENERATION_TTL_S * 1000
        channel = broadcast.in_script_channel
        groups = list(by_slot.values())
        receivers = 0
        # A few at a time: a replay of hundreds must not take every pooled connection at once.
        for start in range(0, len(groups), _SLOTS_AT_ONCE):
            calls = [
                self._script(
                    keys=[key for item_id in ids for key in self.keys.lookup_keys(item_id)],
                    args=[ttl_ms, channel, lsn if self.track_lsn else 0, *(message[item_id] for item_id in ids)],
                )
                for ids in groups[start : start + _SLOTS_AT_ONCE]
            ]
            # Every call runs; the first failure is raised once all have settled.
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
                receivers += int(outcome)
        return receivers + await broadcast.publish_after([message[item_id] for item_id in item_ids])

    async def replay(self) -> int:
        """Deliver every recorded invalidation; how many were delivered. Raises on an outage."""
        if self.outbox is None:
            return 0
        delivered = 0
        while True:
            rows = await self.pg.fetch(self.outbox.pending_many, REPLAY_BATCH)
            if not rows:
                return delivered
            item_ids = [row["id"] for row in rows]
            await self.deliver(item_ids, max(row["lsn"] for row in rows))
            await self.pg.execute(self.outbox.settle, item_ids, [row["seq"] for row in rows])
            self.metrics.invalidations_replayed.inc(len(rows))
            delivered += len(rows)
            if len(rows) < REPLAY_BATCH:
                return delivered

    async def replay_forever(self) -> None:
        while True:
            try:
                await self.replay()
            except (*POSTGRES_ERRORS, *REDIS_DOWN) as exc:
                # Either dependency may be down; the records wait in Postgres, and we try again.
                logger.debug("invalidation replay postponed (%s)", exc)
            await asyncio.sleep(REPLAY_EVERY_S)
