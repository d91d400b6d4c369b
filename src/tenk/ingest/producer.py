"""The API side of the stream: XADDs from concurrent requests leave together.

Each request hands its encoded events to `add` and waits. One sender sends everything that queued up
while the previous round trip was in flight as one script call, then wakes each waiter. Under load a
request costs a future, not a Redis command of its own; when idle a request goes out at once, because
the sender does not wait to fill a batch. A request returns only after Redis has confirmed its XADDs.

With TENK_INGEST_SHARDS > 1 each round sends one script call per shard its entries fall into, all at
once (on a cluster, to each shard's own master); each shard refuses or adds its part whole. A request
whose entries span shards fails if any of its parts failed, even though other parts may be in: a
503 never promises that nothing was added (see `accept.py`).

Before its first call it records its shard count in Redis (`keys.SHARDS_SEEN`): workers read every
shard any API has added to, so lowering TENK_INGEST_SHARDS strands nothing.

With `replicated` durability each call is followed by `WAIT 1 <replica_wait_ms>` on the same
connection; a call no replica acknowledged in time fails its requests with NotReplicated (503).

With tracing on (`traced`), `add` also takes the trace context of the calling request's span and the
call goes through `keys.XADD_MANY_TRACED`, which stores it in each of the request's entries (one context
per request on the wire, however many events). With tracing off nothing of that runs: same script, same
arguments, same entries.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis

from tenk.ingest import keys
from tenk.ingest.stream import shards_in_use
from tenk.platform import cancel_and_wait, on_one_connection, raise_if_cancelled

logger = logging.getLogger("tenk.ingest.producer")

_MAX_ENTRIES_PER_CALL = 4096


class BacklogFull(Exception):
    """Redis refused the batch: the backlog would pass TENK_INGEST_MAX_BACKLOG or TENK_INGEST_MAX_BACKLOG_BYTES."""


class NotReplicated(Exception):
    """No replica acknowledged the append within TENK_INGEST_REPLICA_WAIT_MS (`replicated` durability)."""


class StreamProducer:
    def __init__(
        self,
        redis: Redis,
        max_backlog: int,
        max_backlog_bytes: int,
        shards: int = 1,
        replica_wait_ms: int | None = None,
        traced: bool = False,
    ) -> None:
        self._redis = redis
        self._traced = traced
        self._current_context: Callable[[], bytes | None] | None = None
        if traced:
            from tenk.ingest.tracelinks import current_context

            self._current_context = current_context
        self._source = keys.XADD_MANY_TRACED if traced else keys.XADD_MANY
        self._script = redis.register_script(self._source)
        self._shards = shards
        # Recorded before the first entry goes in, so that workers read every shard that holds any.
        self._shards_recorded = False
        # Each shard holds at most its share of the caps, so the total caps hold too.
        self._caps: list[bytes | int] = [max_backlog_bytes // shards, max(1, max_backlog // shards)]
        self._replica_wait_ms = replica_wait_ms
        # Per request: its entries by shard, its trace context (tracing on and sampled only), its waiter.
        self._queue: list[tuple[dict[int, list[bytes]], bytes | None, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sender = asyncio.create_task(self._send_forever(), name="ingest-producer")

    async def stop(self) -> None:
        await cancel_and_wait(self._sender)
        for _, _, waiter in self._queue:
            if not waiter.done():
                waiter.set_exception(ConnectionError("the API is shutting down"))
        self._queue.clear()

    async def add(self, entries: list[bytes]) -> None:
        """Append the entries to the stream; returns once Redis has confirmed all of them.

        Raises BacklogFull when the stream refused them (they may have shared a call with others'
        entries: all of a call is added, or none of it), and a REDIS_DOWN error when Redis failed.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        by_shard: dict[int, list[bytes]] = {0: entries}
        if self._shards > 1:
            by_shard = defaultdict(list)
            for entry in entries:
                by_shard[keys.shard_of(entry, self._shards)].append(entry)
        # Read here, in the request's own task: the sender's task has no request span.
        context = self._current_context() if self._current_context is not None else None
        self._queue.append((by_shard, context, waiter))
        self._wake.set()
        await waiter

    async def _send_forever(self) -> None:
        while True:
            raise_if_cancelled()
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                taken = 0
                count = 0
                for by_shard, _, _ in self._queue:
                    size = sum(len(entries) for entries in by_shard.values())
                    if count and count + size > _MAX_ENTRIES_PER_CALL:
                        break
                    count += size
                    taken += 1
                batch, self._queue = self._queue[:taken], self._queue[taken:]
                calls: dict[int, list[bytes | int]] = {}
                for by_shard, context, _ in batch:
                    for shard, entries in by_shard.items():
                        args = calls.setdefault(shard, [*self._caps])
                        if self._traced:
                            args += (context or b"", len(entries))
                        args.extend(entries)
                try:
                    outcomes = await self._append_all(calls)
                except asyncio.CancelledError:
                    for _, _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(ConnectionError("the API is shutting down"))
                    raise
                for by_shard, _, waiter in batch:
                    if not waiter.done():
                        _settle(waiter, [outcomes[shard] for shard in by_shard])

    async def _append_all(self, calls: dict[int, list[bytes | int]]) -> dict[int, Any]:
        """Each shard's call, at once; the outcome of each (its reply, or the exception it raised)."""
        if not self._shards_recorded:
            try:
                await shards_in_use(self._redis, self._shards)
            except Exception as exc:
                return dict.fromkeys(calls, exc)
            self._shards_recorded = True
        if len(calls) == 1:
            # One shard (every flush, with one): awaited here, without gather's task for it.
            ((shard, args),) = calls.items()
            try:
                return {shard: await self._append(shard, args)}
            except asyncio.CancelledError as exc:
                # As gather would: only this task's own cancellation stops the sender; one raised inside
                # the call is its outcome, as any other error is.
                raise_if_cancelled()
                return {shard: exc}
            except Exception as exc:
                return {shard: exc}
        replies = await asyncio.gather(
            *(self._append(shard, args) for shard, args in calls.items()), return_exceptions=True
        )
        return dict(zip(calls, replies, strict=True))

    async def _append(self, shard: int, args: list[bytes | int]) -> Any:
        stream, stats = keys.stream_key(shard), keys.stats_key(shard)
        try:
            if self._replica_wait_ms is None:
                return await self._script(keys=[stream, stats], args=args)
            return await self._append_replicated(stream, stats, args, self._replica_wait_ms)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("XADD of %d events failed: %s", self._events_in(args), exc)
            raise

    async def _append_replicated(self, stream: str, stats: str, args: list[bytes | int], wait_ms: int) -> Any:
        # EVAL, not EVALSHA: a new (promoted) master may not have the script, and loading it would
        # take a write on another connection, which WAIT would not count.
        added, replicas = await on_one_connection(
            self._redis,
            stream,
            ("EVAL", self._source, 2, stream, stats, *args),
            ("WAIT", 1, wait_ms),
        )
        if added != keys.BACKLOG_FULL and int(replicas) < 1:
            raise NotReplicated()
        return added

    def _events_in(self, args: list[bytes | int]) -> int:
        if not self._traced:
            return len(args) - 2
        count, i = 0, 2
        while i < len(args):
            count += int(args[i + 1])
            i += 2 + int(args[i + 1])
        return count


def _settle(waiter: asyncio.Future[None], outcomes: list[Any]) -> None:
    """A request's result is its worst part's: an error, then a refusal, then success."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            waiter.set_exception(outcome)
            return
    if any(outcome == keys.BACKLOG_FULL for outcome in outcomes):
        waiter.set_exception(BacklogFull())
    else:
        waiter.set_result(None)
