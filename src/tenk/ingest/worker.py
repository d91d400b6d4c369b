"""`tenk worker`: one consumer of the event stream, writing to Postgres.

Three tasks share a buffer of entries read but not yet written:

- the reader replays this consumer's own pending entries (a previous run died holding them), then
  reads new ones with XREADGROUP, never holding more than two batches;
- the flusher writes a batch when it is full or when its oldest entry has waited TENK_INGEST_FLUSH_MS,
  on its own clock, whether or not a read is blocked. Flush order: COPY into the staging table,
  INSERT..SELECT ON CONFLICT DO NOTHING, COMMIT, and only then XACK. A crash anywhere before the XACK
  leaves the entries pending, to be written again; the ON CONFLICT makes that second write a no-op;
- upkeep trims what every group has acknowledged, keeps this consumer's entries from looking idle,
  and claims entries that dead consumers left idle.

SIGTERM stops the reader, flushes what is in hand, and exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from contextlib import suppress
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from tenk.connections import REDIS_DOWN
from tenk.ingest import codec, keys, metrics
from tenk.ingest.settings import IngestSettings
from tenk.ingest.stream import ensure_group, read_backlog, trim_acknowledged
from tenk.ingest.writer import DeadLetter, GiveUp, PostgresWriter
from tenk.settings import Settings

logger = logging.getLogger("tenk.ingest.worker")

_MAX_BACKOFF_S = 1.0


class Held(NamedTuple):
    stream_id: bytes
    entry: bytes | None
    arrived: float
    deliveries: int


def default_consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _as_parsed(response: Any, **_: Any) -> Any:
    return response


def _id_text(stream_id: Any) -> str:
    return stream_id.decode() if isinstance(stream_id, bytes) else str(stream_id)


class Worker:
    def __init__(self, settings: Settings, ingest: IngestSettings, name: str) -> None:
        self.ingest = ingest
        self.name = name
        self.redis = Redis.from_url(
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
        self.writers = [
            PostgresWriter(settings.resolved_database_url, ingest.write_mode, name) for _ in range(ingest.connections)
        ]
        self._idle_writers: asyncio.Queue[PostgresWriter] = asyncio.Queue()
        for writer in self.writers:
            self._idle_writers.put_nowait(writer)
        self._flushes: set[asyncio.Task[None]] = set()
        self.buffer: list[Held] = []
        # Ids in the buffer or being flushed: touched so that no one claims them, skipped if claimed twice.
        self.held: set[bytes] = set()
        self._capacity = (ingest.connections + 1) * ingest.batch
        self._has_work = asyncio.Event()
        self._has_room = asyncio.Event()
        self._reading = True
        self._draining = False
        self._give_up_at: float | None = None
        self._gave_up = False

    async def run(self, stop: asyncio.Event) -> None:
        await self._until_redis(self._join, stop)
        flusher = asyncio.create_task(self._flush_forever(), name="flusher")
        reader = asyncio.create_task(self._read_forever(), name="reader")
        upkeep = asyncio.create_task(self._upkeep_forever(), name="upkeep")
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({flusher, reader, upkeep, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in done - {stopper}:
            # A task that ended by itself failed; surface it rather than run half a worker.
            task.result()
        logger.info("stopping: %d entries in hand", len(self.buffer))
        self._reading = False
        self._has_room.set()
        # A read in flight may still bring entries to flush; one that is merely blocked is cancelled
        # (whatever Redis delivered to it stays pending for this name, to be replayed or claimed).
        with suppress(TimeoutError):
            await asyncio.wait_for(reader, min(self.ingest.block_ms / 1000, 1.0) + 0.5)
        upkeep.cancel()
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
        for task in (upkeep, stopper):
            with suppress(asyncio.CancelledError):
                await task

    async def _join(self) -> None:
        await ensure_group(self.redis)
        # Listed from the start (a blocked XREADGROUP does not create it on Redis 6).
        await self.redis.xgroup_createconsumer(keys.STREAM, keys.GROUP, self.name)

    async def _until_redis(self, op: Any, stop: asyncio.Event) -> None:
        backoff = 0.05
        while not stop.is_set():
            try:
                await op()
                return
            except REDIS_DOWN as exc:
                logger.warning("redis unavailable (%s); retrying", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    def _take(self, entries: list[tuple[bytes, dict[bytes, bytes] | None]], deliveries: dict[bytes, int] | None) -> int:
        now = time.monotonic()
        taken = 0
        for stream_id, fields in entries:
            if stream_id in self.held:
                continue
            self.held.add(stream_id)
            count = 1 if deliveries is None else deliveries.get(stream_id, 2)
            self.buffer.append(Held(stream_id, fields.get(keys.FIELD) if fields else None, now, count))
            taken += 1
        if taken:
            self._has_work.set()
        return taken

    def _take_new(self, entries: list[list[Any]]) -> None:
        """First deliveries, as [id, [field, value]] lists straight from the reply."""
        now = time.monotonic()
        held, append = self.held, self.buffer.append
        for stream_id, fields in entries:
            if stream_id in held:
                continue
            held.add(stream_id)
            append(Held(stream_id, fields[1] if fields and fields[0] == keys.FIELD else None, now, 1))
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

    async def _read_forever(self) -> None:
        await self._replay_own_pending()
        backoff = 0.05
        while self._reading:
            room = await self._wait_for_room()
            if not room:
                return
            try:
                reply: Any = await self.redis.xreadgroup(
                    keys.GROUP,
                    self.name,
                    {keys.STREAM: ">"},
                    count=min(room, self.ingest.batch),
                    block=self.ingest.block_ms,
                )
            except ResponseError as exc:
                # Redis lost the group (restarted without its AOF): make it again and go on.
                logger.warning("read failed (%s)", exc)
                if "NOGROUP" in str(exc):
                    with suppress(*REDIS_DOWN):
                        await ensure_group(self.redis)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
                continue
            except REDIS_DOWN as exc:
                logger.warning("read failed (%s); retrying", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
                continue
            backoff = 0.05
            if reply:
                # A map under RESP3, a list of [stream, entries] pairs under RESP2.
                for entries in reply.values() if isinstance(reply, dict) else (pair[1] for pair in reply):
                    self._take_new(entries)

    async def _replay_own_pending(self) -> None:
        """Entries delivered to this consumer name and never acknowledged: the last run died with them."""
        start = "-"
        while self._reading:
            room = await self._wait_for_room()
            if not room:
                return
            try:
                pending: Any = await self.redis.xpending_range(
                    keys.STREAM,
                    keys.GROUP,
                    min=start,
                    max="+",
                    count=min(room, self.ingest.batch),
                    consumername=self.name,
                )
                if not pending:
                    return
                ids = [row["message_id"] for row in pending]
                claimed: Any = await self.redis.xclaim(keys.STREAM, keys.GROUP, self.name, 0, ids)
            except REDIS_DOWN as exc:
                logger.warning("replay of pending entries failed (%s); retrying", exc)
                await asyncio.sleep(0.2)
                continue
            # XCLAIM counted one more delivery.
            counts = {row["message_id"]: int(row["times_delivered"]) + 1 for row in pending}
            metrics.REPLAYED.inc(self._take(claimed, counts))
            start = "(" + _id_text(ids[-1])

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
        if self._gave_up:
            logger.error("postgres unreachable at shutdown; %d entries stay pending for the next run", len(self.buffer))

    async def _flush(self, taken: list[Held], writer: PostgresWriter) -> None:
        try:
            await self._write_then_acknowledge(taken, writer)
        except GiveUp:
            # Shutting down with Postgres away: these stay pending, for the next run to write.
            self._gave_up = True
            self._has_work.set()
        except Exception:
            # Not a data error, not an outage: let go of the batch. Its entries stay pending, turn
            # idle, and are claimed again, each delivery counted, until the limit dead-letters them.
            logger.exception("flush of %d entries failed; they will be redelivered", len(taken))
            self.held.difference_update(held.stream_id for held in taken)
        finally:
            self._idle_writers.put_nowait(writer)

    async def _write_then_acknowledge(self, taken: list[Held], writer: PostgresWriter) -> None:
        started = time.perf_counter()
        good: list[tuple[bytes, bytes, int]] = []
        dead: list[DeadLetter] = []
        for stream_id, entry, _, deliveries in taken:
            if entry is None or not codec.well_formed(entry):
                dead.append(DeadLetter(stream_id.decode(), entry or b"", "malformed entry", deliveries))
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
        # Committed: only now may Redis forget these entries.
        await self._acknowledge(taken, written, len(dead), started)
        metrics.ROWS_WRITTEN.inc(written)
        metrics.DEAD_LETTERS.inc(len(dead))

    async def _acknowledge(self, taken: list[Held], written: int, dead: int, started: float) -> None:
        ids = [held.stream_id for held in taken]
        backoff = 0.05
        while True:
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    await self._ack_script(
                        keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids)], client=pipe
                    )
                    pipe.hincrby(keys.STATS, "rows_written", written)
                    if dead:
                        pipe.hincrby(keys.STATS, "dead_letters", dead)
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
                    logger.error("could not acknowledge %d written entries (%s)", len(ids), exc)
                    break
                logger.warning("acknowledge failed (%s); retrying", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
        self.held.difference_update(ids)
        metrics.FLUSH_SIZE.observe(len(taken))
        metrics.FLUSH_SECONDS.observe(time.perf_counter() - started)

    async def _upkeep_forever(self) -> None:
        every = self.ingest.trim_every_ms / 1000
        next_claim = time.monotonic()
        while True:
            try:
                backlog = await read_backlog(self.redis)
                metrics.BACKLOG_LAG.set(backlog.lag)
                metrics.BACKLOG_PENDING.set(backlog.pending)
                await trim_acknowledged(self.redis)
                if time.monotonic() >= next_claim:
                    next_claim = time.monotonic() + self.ingest.claim_every_ms / 1000
                    await self._touch_held()
                    await self._claim_idle()
            except REDIS_DOWN as exc:
                logger.debug("upkeep skipped: %s", exc)
            await asyncio.sleep(every)

    async def _touch_held(self) -> None:
        """Reset the idle time of what this consumer holds (JUSTID does not count a delivery), so a
        slow flush, say while Postgres is down, is not mistaken for a dead consumer."""
        if self.held:
            await self.redis.xclaim(keys.STREAM, keys.GROUP, self.name, 0, list(self.held), justid=True)

    async def _claim_idle(self) -> None:
        start: Any = "0-0"
        while self._reading:
            room = self._capacity - len(self.buffer)
            if room <= 0:
                return
            reply: Any = await self.redis.xautoclaim(
                keys.STREAM,
                keys.GROUP,
                self.name,
                self.ingest.claim_idle_ms,
                start_id=start,
                count=min(room, self.ingest.batch),
            )
            start, claimed = reply[0], reply[1]
            fresh = [(stream_id, fields) for stream_id, fields in claimed if stream_id not in self.held]
            if fresh:
                pending: Any = await self.redis.xpending_range(
                    keys.STREAM,
                    keys.GROUP,
                    min=fresh[0][0],
                    max=fresh[-1][0],
                    count=len(claimed) + len(self.held),
                    consumername=self.name,
                )
                counts = {row["message_id"]: int(row["times_delivered"]) for row in pending}
                taken = self._take(fresh, counts)
                metrics.CLAIMED.inc(taken)
                logger.info("claimed %d idle entries from dead consumers", taken)
            if _id_text(start) == "0-0":
                return

    async def _leave_group(self) -> None:
        """Remove this consumer if it holds nothing, so that short-lived names don't pile up in the group."""
        with suppress(*REDIS_DOWN):
            for consumer in await self.redis.xinfo_consumers(keys.STREAM, keys.GROUP):
                name = consumer["name"]
                if _id_text(name) == self.name and int(consumer["pending"]) == 0:
                    await self.redis.xgroup_delconsumer(keys.STREAM, keys.GROUP, self.name)


async def _serve(settings: Settings, ingest: IngestSettings, name: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await Worker(settings, ingest, name).run(stop)


def run_worker(settings: Settings, name: str | None) -> None:
    """Run one consumer until SIGTERM or SIGINT."""
    import uvloop

    ingest = IngestSettings()
    if ingest.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(ingest.metrics_port, addr="127.0.0.1")
    consumer = name or default_consumer_name()
    logger.info("worker %s: batch %d, flush %d ms, mode %s", consumer, ingest.batch, ingest.flush_ms, ingest.write_mode)
    uvloop.run(_serve(settings, ingest, consumer))
