"""`tenk worker`: one consumer of the event stream, writing to Postgres.

Three tasks share a buffer of entries read but not yet written:

- the reader replays this consumer's own pending entries (a previous run died holding them), then
  reads new ones with XREADGROUP, never holding more than two batches;
- the flusher writes a batch when it is full or when its oldest entry has waited TENK_INGEST_FLUSH_MS,
  on its own clock, whether or not a read is blocked. Flush order: COPY (straight into `events` for a
  batch of new ids on one day, else into the staging table, then INSERT..SELECT ON CONFLICT DO NOTHING;
  see `PostgresWriter`), COMMIT, and only then XACK. A crash anywhere before the XACK leaves the entries
  pending, to be written again; the stored-ids question, or the ON CONFLICT, makes that a no-op;
- housekeeping makes the `events` day partitions ahead of time and drops those past retention
  (`tenk.ingest.partitions`), and deletes expired dead letters (`tenk.ingest.dead_letters`);
- upkeep trims what every group has acknowledged, keeps this consumer's entries from looking idle,
  claims entries that dead consumers left idle, and resets the backlog counters from the stream
  itself (`keys.RECONCILE`), so that a drift can never block ingestion for good.

Entries deleted from the stream while pending come back from XCLAIM and XAUTOCLAIM as nil (Redis 6.2,
redis#7021). There is nothing left to write: they are acknowledged and counted as `vanished`, so one
of them never sinks the rest of its batch. An event whose id is already stored with other content is
a conflict: dead-lettered with reason `conflict` and counted; the same event again is a silent no-op.

With TENK_INGEST_SHARDS > 1 every worker reads every shard (a reader per shard), so the shards spread
over all workers and a dead worker's shards are still read by the others; upkeep trims, claims and
reconciles shard by shard, and each shard's entries are acknowledged on their own stream. "Every shard"
is every shard any process has used (`keys.SHARDS_SEEN`), not this worker's setting: after the setting
is lowered the higher shards are still drained, and upkeep starts readers for shards an API adds later. Postgres
knows an entry of shard n > 0 by `n/<stream id>` (`keys.writer_stream_id`): stream ids repeat across
shards.

An entry may carry, after its event, the trace context of the span that accepted it (`keys.TRACE_FIELD`,
written by an API with tracing on). With tracing on here too, each batch write runs in a span linked to
its entries' accept spans (`tenk.ingest.tracelinks`); a reclaimed entry still links to its accept, as the
context travels in the entry. Entries without one (tracing off, an older API) are written the same.

SIGTERM stops the reader, flushes what is in hand, and exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, suppress
from typing import Any, NamedTuple

import asyncpg
from redis.exceptions import ResponseError

from tenk.ingest import codec, dead_letters, keys, metrics, partitions
from tenk.ingest.stream import (
    Backlog,
    ensure_group,
    read_backlogs,
    reconcile_backlog,
    shards_in_use,
    trim_acknowledged,
)
from tenk.ingest.writer import CONFLICT, DeadLetter, GiveUp, PostgresWriter, SchemaMissing
from tenk.ops.tracing import tracing_on
from tenk.platform import (
    POSTGRES_ERRORS,
    REDIS_DOWN,
    Backoff,
    cancel_and_wait,
    connect_redis,
    pooler_connect_kwargs,
    raise_if_cancelled,
    redis_from_url,
    reply_text,
)
from tenk.settings import Settings

logger = logging.getLogger("tenk.ingest.worker")


def _backoff() -> Backoff:
    """Redis gone: try again soon, then at most once a second, so that it is back in use within a second."""
    return Backoff(0.05, 1.0)


class Held(NamedTuple):
    stream_id: bytes
    entry: bytes | None
    arrived: float
    deliveries: int
    shard: int = 0
    # The accepting span's trace context, if the entry holds one (see `keys.TRACE_FIELD`).
    trace: bytes | None = None

    @property
    def size(self) -> int:
        """The bytes XADD_MANY(_TRACED) counted for the entry: its field values."""
        return len(self.entry or b"") + len(self.trace or b"")


def _named_fields(fields: list[Any]) -> tuple[bytes | None, bytes | None]:
    """(event, trace context) of an entry whose fields are not the usual [e, event(, t, context)]:
    written by hand, say. Read by name, as a claimed entry's fields are."""
    named = dict(zip(fields[::2], fields[1::2], strict=False))
    return named.get(keys.FIELD), named.get(keys.TRACE_FIELD)


def default_consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _as_parsed(response: Any, **_: Any) -> Any:
    return response


class Worker:
    def __init__(self, settings: Settings, name: str) -> None:
        ingest = settings.ingest
        self.ingest = ingest
        self.name = name
        self.redis = redis_from_url(
            settings.resolved_redis_url,
            # A blocked XREADGROUP must not look like a dead socket.
            socket_timeout=ingest.block_ms / 1000 + ingest.redis_timeout_s,
            socket_connect_timeout=ingest.redis_timeout_s,
        )
        # New entries arrive as hiredis parsed them; redis-py's per-entry dicts cost more than the write.
        self.redis.set_response_callback("XREADGROUP", _as_parsed)
        self._ack_script = self.redis.register_script(keys.XACK_COUNTED)
        # Each flush has a connection (and its staging table) to itself; while one commits, the next
        # batch is already being copied on another, so commit latency does not cap throughput.
        self._dsn = settings.resolved_database_url
        self._connect_kwargs = pooler_connect_kwargs(settings.database.pooler)
        through_pooler = settings.database.pooler == "transaction"
        self.writers = [
            PostgresWriter(self._dsn, ingest.write_mode, name, self._connect_kwargs, through_pooler=through_pooler)
            for _ in range(ingest.connections)
        ]
        self._idle_writers: asyncio.Queue[PostgresWriter] = asyncio.Queue()
        for writer in self.writers:
            self._idle_writers.put_nowait(writer)
        self._flushes: set[asyncio.Task[None]] = set()
        self.buffer: list[Held] = []
        # Per shard read (see `_add_shards`): its stream, its stats hash, and the ids in the buffer or being
        # flushed, touched so that no one claims them, skipped if claimed twice.
        self.streams: list[str] = []
        self.stats: list[str] = []
        self.held: list[set[bytes]] = []
        self._more_shards = asyncio.Event()
        self._capacity = (ingest.connections + 1) * ingest.batch
        self._has_work = asyncio.Event()
        self._has_room = asyncio.Event()
        self._reading = True
        self._draining = False
        self._give_up_at: float | None = None
        self._gave_up = False
        self._fatal: SchemaMissing | None = None
        self._write_span: Callable[[Iterable[bytes | None], int], AbstractContextManager[Any]] | None = None
        if tracing_on():
            from tenk.ingest.tracelinks import write_span

            self._write_span = write_span

    async def run(self, stop: asyncio.Event) -> None:
        await self._until_redis(self._join, stop)
        flusher = asyncio.create_task(self._flush_forever(), name="flusher")
        reader = asyncio.create_task(self._read_all_shards(), name="reader")
        upkeep = asyncio.create_task(self._upkeep_forever(), name="upkeep")
        housekeeping = asyncio.create_task(self._maintain_partitions_forever(), name="partitions")
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait(
            {flusher, reader, upkeep, housekeeping, stopper}, return_when=asyncio.FIRST_COMPLETED
        )
        for task in done - {stopper}:
            # A task that ended by itself failed; surface it rather than run half a worker.
            task.result()
        logger.info("stopping: %d entries in hand", len(self.buffer))
        self._reading = False
        self._has_room.set()
        self._more_shards.set()
        # A read in flight may still bring entries to flush; one that is merely blocked is cancelled
        # (whatever Redis delivered to it stays pending for this name, to be replayed or claimed).
        with suppress(TimeoutError):
            await asyncio.wait_for(reader, min(self.ingest.block_ms / 1000, 1.0) + 0.5)
        # Both loops check their cancellation each turn (`raise_if_cancelled`): one that a library
        # swallowed, say inside asyncpg.connect, must not leave the worker asleep for an hour.
        await cancel_and_wait(upkeep)
        await cancel_and_wait(housekeeping)
        self._give_up_at = time.monotonic() + self.ingest.shutdown_timeout_s
        for writer in self.writers:
            writer.give_up_at = self._give_up_at
        self._draining = True
        self._has_work.set()
        await flusher
        await self._leave_group()
        for writer in self.writers:
            await writer.close()
        await self.redis.aclose()
        await cancel_and_wait(stopper)

    @property
    def shards(self) -> range:
        return range(len(self.streams))

    async def _join(self) -> None:
        await connect_redis(self.redis)
        await self._add_shards(await shards_in_use(self.redis, self.ingest.shards))

    async def _add_shards(self, count: int) -> None:
        """Read shards up to `count` too; readers for the new ones start at once (`_read_all_shards`)."""
        for shard in range(len(self.streams), count):
            await ensure_group(self.redis, shard)
            # Listed from the start (a blocked XREADGROUP does not create it on Redis 6).
            await self.redis.xgroup_createconsumer(keys.stream_key(shard), keys.GROUP, self.name)
            self.streams.append(keys.stream_key(shard))
            self.stats.append(keys.stats_key(shard))
            self.held.append(set())
            self._more_shards.set()

    async def _until_redis(self, op: Any, stop: asyncio.Event) -> None:
        backoff = _backoff()
        while not stop.is_set():
            try:
                await op()
                return
            except REDIS_DOWN as exc:
                logger.warning("redis unavailable (%s); retrying", exc)
                await backoff.sleep()

    def _take(
        self,
        shard: int,
        entries: list[tuple[bytes | None, dict[bytes, bytes] | None]],
        deliveries: dict[bytes, int] | None,
    ) -> int:
        now = time.monotonic()
        taken = 0
        held = self.held[shard]
        for stream_id, fields in entries:
            # None: deleted while pending (see `_forget_vanished`).
            if stream_id is None or stream_id in held:
                continue
            held.add(stream_id)
            count = 1 if deliveries is None else deliveries.get(stream_id, 2)
            entry, trace = (fields.get(keys.FIELD), fields.get(keys.TRACE_FIELD)) if fields else (None, None)
            self.buffer.append(Held(stream_id, entry, now, count, shard, trace))
            taken += 1
        if taken:
            self._has_work.set()
        return taken

    def _take_new(self, shard: int, entries: list[list[Any]]) -> None:
        """First deliveries, as [id, [field, value, ...]] lists straight from the reply."""
        now = time.monotonic()
        held, append = self.held[shard], self.buffer.append
        for stream_id, fields in entries:
            if stream_id in held:
                continue
            held.add(stream_id)
            size = len(fields) if fields else 0
            if size == 2 and fields[0] == keys.FIELD:
                append(Held(stream_id, fields[1], now, 1, shard))
            elif size == 4 and fields[0] == keys.FIELD and fields[2] == keys.TRACE_FIELD:
                append(Held(stream_id, fields[1], now, 1, shard, fields[3]))
            else:
                entry, trace = _named_fields(fields) if fields else (None, None)
                append(Held(stream_id, entry, now, 1, shard, trace))
        if entries:
            self._has_work.set()

    async def _wait_for_room(self) -> int:
        while self._reading:
            room = self._capacity - len(self.buffer)
            if room > 0:
                return room
            self._has_room.clear()
            await self._has_room.wait()
        return 0

    async def _read_all_shards(self) -> None:
        async with asyncio.TaskGroup() as readers:
            started = 0
            while self._reading:
                for shard in range(started, len(self.streams)):
                    readers.create_task(self._read_forever(shard), name=f"reader-{shard}")
                started = len(self.streams)
                self._more_shards.clear()
                await self._more_shards.wait()

    async def _read_forever(self, shard: int) -> None:
        stream = self.streams[shard]
        await self._replay_own_pending(shard)
        backoff = _backoff()
        while self._reading:
            room = await self._wait_for_room()
            if not room:
                return
            try:
                reply: Any = await self.redis.xreadgroup(
                    keys.GROUP,
                    self.name,
                    {stream: ">"},
                    count=min(room, self.ingest.batch),
                    block=self.ingest.block_ms,
                )
            except ResponseError as exc:
                # Redis lost the group (restarted without its AOF): make it again and go on.
                logger.warning("read failed (%s)", exc)
                if "NOGROUP" in str(exc):
                    with suppress(*REDIS_DOWN):
                        await ensure_group(self.redis, shard)
                await backoff.sleep()
                continue
            except REDIS_DOWN as exc:
                logger.warning("read failed (%s); retrying", exc)
                await backoff.sleep()
                continue
            backoff.reset()
            if reply:
                # A map under RESP3, a list of [stream, entries] pairs under RESP2.
                for entries in reply.values() if isinstance(reply, dict) else (pair[1] for pair in reply):
                    self._take_new(shard, entries)

    async def _replay_own_pending(self, shard: int) -> None:
        """Entries delivered to this consumer name and never acknowledged: the last run died with them."""
        stream = self.streams[shard]
        start = "-"
        while self._reading:
            room = await self._wait_for_room()
            if not room:
                return
            try:
                pending: Any = await self.redis.xpending_range(
                    stream,
                    keys.GROUP,
                    min=start,
                    max="+",
                    count=min(room, self.ingest.batch),
                    consumername=self.name,
                )
                if not pending:
                    return
                ids = [row["message_id"] for row in pending]
                # Deleted entries first: from Redis 7 (and in Valkey) XCLAIM drops them from the pending
                # list without a word, so after it there would be nothing left to acknowledge and count.
                gone = set(await self._forget_vanished(shard, ids))
                live = [stream_id for stream_id in ids if stream_id not in gone]
                claimed: Any = await self.redis.xclaim(stream, keys.GROUP, self.name, 0, live) if live else []
            except REDIS_DOWN as exc:
                logger.warning("replay of pending entries failed (%s); retrying", exc)
                await asyncio.sleep(0.2)
                continue
            # XCLAIM counted one more delivery.
            counts = {row["message_id"]: int(row["times_delivered"]) + 1 for row in pending}
            metrics.REPLAYED.inc(self._take(shard, claimed, counts))
            returned = {stream_id for stream_id, _ in claimed}
            # Redis 6.2 answers a deleted entry as nil and keeps it pending (redis#7021): one deleted since.
            await self._forget_vanished(shard, [stream_id for stream_id in live if stream_id not in returned])
            start = "(" + reply_text(ids[-1])

    async def _flush_forever(self) -> None:
        flush_s = self.ingest.flush_ms / 1000
        while True:
            self._has_work.clear()
            if self._gave_up:
                break
            if self.buffer and (
                len(self.buffer) >= self.ingest.batch
                or self._draining
                or time.monotonic() >= self.buffer[0].arrived + flush_s
            ):
                writer = await self._idle_writers.get()
                # Taken only now: entries that arrived while waiting for a connection join this batch.
                taken = self.buffer[: self.ingest.batch]
                del self.buffer[: self.ingest.batch]
                self._has_room.set()
                task = asyncio.create_task(self._flush(taken, writer))
                self._flushes.add(task)
                task.add_done_callback(self._flushes.discard)
                continue
            if self._draining:
                break
            timeout = None if not self.buffer else max(0.0, self.buffer[0].arrived + flush_s - time.monotonic())
            with suppress(TimeoutError):
                await asyncio.wait_for(self._has_work.wait(), timeout)
        if self._flushes:
            await asyncio.gather(*self._flushes)
        if self._fatal is not None:
            raise self._fatal
        if self._gave_up:
            logger.error("postgres unreachable at shutdown; %d entries stay pending for the next run", len(self.buffer))

    async def _flush(self, taken: list[Held], writer: PostgresWriter) -> None:
        if self._write_span is None:
            await self._flush_batch(taken, writer)
            return
        # Everything about the batch, its log lines included, happens under its span.
        with self._write_span((held.trace for held in taken), len(taken)):
            await self._flush_batch(taken, writer)

    async def _flush_batch(self, taken: list[Held], writer: PostgresWriter) -> None:
        try:
            await self._write_then_acknowledge(taken, writer)
        except GiveUp:
            # Shutting down with Postgres away: these stay pending, for the next run to write.
            self._gave_up = True
            self._has_work.set()
        except SchemaMissing as exc:
            # Not the events' fault: stop with them pending rather than spend their deliveries.
            logger.error("stopping: %s", exc)
            self._fatal = exc
            self._gave_up = True
            self._has_work.set()
        except Exception:
            # Not a data error, not an outage: let go of the batch. Its entries stay pending, turn
            # idle, and are claimed again, each delivery counted, until the limit dead-letters them.
            logger.exception("flush of %d entries failed; they will be redelivered", len(taken))
            for held in taken:
                self.held[held.shard].discard(held.stream_id)
        finally:
            self._idle_writers.put_nowait(writer)

    async def _write_then_acknowledge(self, taken: list[Held], writer: PostgresWriter) -> None:
        started = time.perf_counter()
        good: list[tuple[bytes, bytes, int]] = []
        dead: list[DeadLetter] = []
        for raw_id, entry, _, deliveries, shard, _ in taken:
            stream_id = keys.writer_stream_id(shard, raw_id)
            if entry is None:
                dead.append(DeadLetter(stream_id.decode(), b"", "malformed entry", deliveries))
            elif (problem := codec.entry_problem(entry)) is not None:
                dead.append(DeadLetter(stream_id.decode(), entry, problem, deliveries))
            elif deliveries > self.ingest.max_deliveries:
                dead.append(DeadLetter(stream_id.decode(), entry, f"delivered {deliveries} times", deliveries))
            else:
                good.append((stream_id, entry, deliveries))
        written, refused = await writer.write_isolating(good)
        dead += refused
        if dead:
            for letter in dead:
                logger.warning("dead letter %s: %s", letter.stream_id, letter.reason)
            await writer.dead_letter(dead)
        conflicts = sum(1 for letter in dead if letter.reason == CONFLICT)
        # Committed: only now may Redis forget these entries.
        await self._acknowledge(taken, written, len(dead), conflicts, started)
        metrics.ROWS_WRITTEN.inc(written)
        metrics.DEAD_LETTERS.inc(len(dead))
        metrics.CONFLICTS.inc(conflicts)

    async def _acknowledge(self, taken: list[Held], written: int, dead: int, conflicts: int, started: float) -> None:
        by_shard: dict[int, list[Held]] = {}
        for held in taken:
            by_shard.setdefault(held.shard, []).append(held)
        backoff = _backoff()
        while by_shard:
            try:
                for shard, helds in list(by_shard.items()):
                    ids = b" ".join(held.stream_id for held in helds)
                    # The sizes XADD_MANY counted, so that the backlog's bytes fall by exactly what it added.
                    sizes = b" ".join(b"%d" % held.size for held in helds)
                    await self._ack_script(keys=[self.streams[shard], self.stats[shard]], args=[keys.GROUP, ids, sizes])
                    del by_shard[shard]
                # The flush-wide counters live in shard 0's hash (see `keys`).
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.hincrby(keys.STATS, "rows_written", written)
                    if dead:
                        pipe.hincrby(keys.STATS, "dead_letters", dead)
                    if conflicts:
                        pipe.hincrby(keys.STATS, "conflicts", conflicts)
                    pipe.hset(
                        keys.STATS,
                        mapping={
                            "last_flush_at_ms": time.time_ns() // 1_000_000,
                            "last_flush_rows": len(taken),
                            "last_flush_ms": round((time.perf_counter() - started) * 1000, 3),
                            "last_flush_consumer": self.name,
                        },
                    )
                    await pipe.execute()
                break
            except REDIS_DOWN as exc:
                metrics.FLUSH_RETRIES.inc()
                if self._give_up_at is not None and time.monotonic() > self._give_up_at:
                    # Written but not acknowledged: the next run writes them again, as no-ops.
                    logger.error("could not acknowledge %d written entries (%s)", len(taken), exc)
                    break
                logger.warning("acknowledge failed (%s); retrying", exc)
                await backoff.sleep()
        for held in taken:
            self.held[held.shard].discard(held.stream_id)
        metrics.FLUSH_SIZE.observe(len(taken))
        metrics.FLUSH_SECONDS.observe(time.perf_counter() - started)

    async def _upkeep_forever(self) -> None:
        every = self.ingest.trim_every_ms / 1000
        next_claim = next_reconcile = time.monotonic()
        while True:
            try:
                await self._add_shards(await shards_in_use(self.redis, self.ingest.shards))
                backlog = Backlog.summed(await read_backlogs(self.redis, len(self.streams)))
                metrics.BACKLOG_LAG.set(backlog.lag)
                metrics.BACKLOG_PENDING.set(backlog.pending)
                metrics.BACKLOG_BYTES.set(backlog.bytes)
                for shard in self.shards:
                    await trim_acknowledged(self.redis, shard)
                if time.monotonic() >= next_claim:
                    next_claim = time.monotonic() + self.ingest.claim_every_ms / 1000
                    for shard in self.shards:
                        await self._touch_held(shard)
                        await self._claim_idle(shard)
                if time.monotonic() >= next_reconcile:
                    next_reconcile = time.monotonic() + self.ingest.reconcile_every_ms / 1000
                    for shard in self.shards:
                        correction = await reconcile_backlog(self.redis, self.ingest.reconcile_limit, shard)
                        if correction is not None and (correction.entries or correction.bytes):
                            metrics.RECONCILED.inc()
            except REDIS_DOWN as exc:
                logger.debug("upkeep skipped: %s", exc)
            raise_if_cancelled()
            await asyncio.sleep(every)

    async def _maintain_partitions_forever(self) -> None:
        while True:
            wait_s = partitions.MAINTAIN_EVERY_S
            try:
                conn = await asyncpg.connect(self._dsn, timeout=5, command_timeout=60, **self._connect_kwargs)
                try:
                    await partitions.maintain(conn, self.ingest.retention_days)
                    await dead_letters.expire(conn, self.ingest.dead_letter_retention_days)
                finally:
                    await conn.close()
            except POSTGRES_ERRORS as exc:
                # Postgres away, or a drop gave way to a reader (lock_timeout): the next round retries,
                # and meanwhile events without a partition wait in events_default.
                logger.warning("event partition upkeep postponed (%s)", exc)
                wait_s = partitions.RETRY_AFTER_S
            raise_if_cancelled()
            await asyncio.sleep(wait_s)

    async def _touch_held(self, shard: int) -> None:
        """Reset the idle time of what this consumer holds (JUSTID does not count a delivery), so a
        slow flush, say while Postgres is down, is not mistaken for a dead consumer."""
        if self.held[shard]:
            await self.redis.xclaim(self.streams[shard], keys.GROUP, self.name, 0, list(self.held[shard]), justid=True)

    async def _claim_idle(self, shard: int) -> None:
        stream, held = self.streams[shard], self.held[shard]
        start: Any = "0-0"
        while self._reading:
            room = self._capacity - len(self.buffer)
            if room <= 0:
                return
            reply: Any = await self.redis.xautoclaim(
                stream,
                keys.GROUP,
                self.name,
                self.ingest.claim_idle_ms,
                start_id=start,
                count=min(room, self.ingest.batch),
            )
            start, claimed = reply[0], reply[1]
            if len(reply) > 2 and reply[2]:
                # Redis 7 drops entries deleted while pending from the pending list and names them here.
                await self._count_vanished(shard, len(reply[2]), acknowledged=False)
            if any(stream_id is None for stream_id, _ in claimed):
                await self._forget_vanished(shard, await self._own_pending_unheld(shard))
            fresh = [
                (stream_id, fields) for stream_id, fields in claimed if stream_id is not None and stream_id not in held
            ]
            if fresh:
                pending: Any = await self.redis.xpending_range(
                    stream,
                    keys.GROUP,
                    min=fresh[0][0],
                    max=fresh[-1][0],
                    count=len(claimed) + len(held),
                    consumername=self.name,
                )
                counts = {row["message_id"]: int(row["times_delivered"]) for row in pending}
                taken = self._take(shard, fresh, counts)
                metrics.CLAIMED.inc(taken)
                logger.info("claimed %d idle entries from dead consumers", taken)
            if reply_text(start) == "0-0":
                return

    async def _own_pending_unheld(self, shard: int) -> list[bytes]:
        pending: Any = await self.redis.xpending_range(
            self.streams[shard], keys.GROUP, min="-", max="+", count=self._capacity, consumername=self.name
        )
        return [row["message_id"] for row in pending if row["message_id"] not in self.held[shard]]

    async def _forget_vanished(self, shard: int, candidates: list[bytes]) -> list[bytes]:
        """Acknowledge the candidates that no longer exist in the stream: pending entries someone
        deleted (XDEL, or a trim by another tool). Only an id whose entry is verifiably gone is
        forgotten, so an entry that still exists is never acknowledged unwritten. Returns those gone."""
        if not candidates:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for stream_id in candidates:
                pipe.xrange(self.streams[shard], stream_id, stream_id)
            found = await pipe.execute()
        gone = [stream_id for stream_id, entries in zip(candidates, found, strict=True) if not entries]
        if not gone:
            return []
        # Size 0: the bytes they were added with are unknown now; the next reconcile corrects them.
        sizes = b" ".join(b"0" for _ in gone)
        acked = await self._ack_script(
            keys=[self.streams[shard], self.stats[shard]], args=[keys.GROUP, b" ".join(gone), sizes]
        )
        logger.warning("%d pending entries were deleted from the stream; acknowledged %d", len(gone), acked)
        # Only what this call acknowledged: the replay and the claim loop can both find the same id
        # gone, and the one whose XACK came second must not count it again.
        if acked:
            await self._count_vanished(shard, int(acked), acknowledged=True)
        return gone

    async def _count_vanished(self, shard: int, count: int, acknowledged: bool) -> None:
        metrics.VANISHED.inc(count)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hincrby(self.stats[shard], "vanished", count)
            if not acknowledged:
                # They left the pending list uncounted; count them as acknowledged, as they are gone.
                pipe.hincrby(self.stats[shard], "acked", count)
            await pipe.execute()

    async def _leave_group(self) -> None:
        """Remove this consumer if it holds nothing, so that short-lived names don't pile up in the group."""
        with suppress(*REDIS_DOWN):
            for stream in self.streams:
                for consumer in await self.redis.xinfo_consumers(stream, keys.GROUP):
                    name = consumer["name"]
                    if reply_text(name) == self.name and int(consumer["pending"]) == 0:
                        await self.redis.xgroup_delconsumer(stream, keys.GROUP, self.name)


async def _serve(settings: Settings, name: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await Worker(settings, name).run(stop)


def run_worker(settings: Settings, name: str | None) -> None:
    """Run one consumer until SIGTERM or SIGINT."""
    import uvloop

    ingest = settings.ingest
    if ingest.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(ingest.metrics_port, addr=ingest.metrics_host)
    consumer = name or default_consumer_name()
    logger.info("worker %s: batch %d, flush %d ms, mode %s", consumer, ingest.batch, ingest.flush_ms, ingest.write_mode)
    uvloop.run(_serve(settings, consumer))
