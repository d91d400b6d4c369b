"""The API's Redis connection pool: redis-py's `BlockingConnectionPool`, less the per-command work that
does nothing for tenk.

For every command, redis-py 8.1's blocking pool:
- takes an `asyncio.Condition` and starts a timeout to hand over a connection;
- formats the pool's name and awaits four observability records, which are no-ops unless redis-py's
  own OpenTelemetry metrics are switched on (tenk exports its own);
- dispatches a release event whose one listener re-authenticates streaming credentials, which tenk
  does not use;
- puts every write under `asyncio.wait_for`, which on Python 3.11 runs the write in a task of its own.

Together, counted with `make bench-budget` (Python 3.11, redis-py 8.1), that was more of a Redis hit's
instructions than a whole read from Postgres costs beyond a local hit (budgets.json: redis_hit, uncached;
the served pairs before and after are in docs/results/2026-11-29/redis-pool/).

What is kept:
- A connection that is free when nobody is queued is handed over directly, and taken back directly.
  When none is free, or anyone is queued, the base class's queue serves the request: its fairness and
  its timeout ("No connection available") are unchanged.
- A write that the socket takes whole cannot wait, so no timeout is started for it. A write the socket
  does not take whole (the transport keeps the rest, as it may for a large pipeline) drains under the
  socket timeout, as before.
- Reads are still under the socket timeout, and every error is still raised as redis-py raises it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from redis.asyncio import BlockingConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class PromptConnectionPool(BlockingConnectionPool):
    """A `BlockingConnectionPool` whose uncontended take and give-back are a list pop and append."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.connection_class = prompt_writes(self.connection_class)
        # Callers in the base class's queue, or on their way into it: while any are, every take and
        # give-back goes through the queue, so that a give-back wakes one and nobody jumps the queue.
        self._queued = 0
        # A release event re-authenticates connections only for a credential provider: with one, every
        # give-back goes through the base class, which dispatches it.
        self._reauthenticates = self.connection_kwargs.get("credential_provider") is not None

    def _uncontended(self) -> bool:
        return not (self._queued or self._in_maintenance or self._reauthenticates)

    async def get_connection(self, command_name: Any = None, *keys: Any, **options: Any) -> AbstractConnection:
        if not (self._available_connections and self._uncontended()):
            self._queued += 1
            try:
                return await super().get_connection()  # type: ignore[no-any-return,no-untyped-call]
            finally:
                self._queued -= 1
        connection: AbstractConnection = self._available_connections.pop()
        self._in_use_connections.add(connection)
        try:
            # Connects a connection the pool dropped, and refuses one with unread data (as the base does).
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def release(self, connection: AbstractConnection) -> None:
        if not self._uncontended() or self._lock.locked() or connection.should_reconnect():  # type: ignore[no-untyped-call]
            await super().release(connection)
            return
        self._in_use_connections.remove(connection)
        self._available_connections.append(connection)


def prompt_writes(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class` (TCP, TLS, Unix socket or Sentinel-managed) with a write that starts no timeout
    when it cannot wait."""
    return type(f"Prompt{connection_class.__name__}", (_PromptWrites, connection_class), {})


class _PromptWrites(AbstractConnection):
    async def send_packed_command(self, command: bytes | str | Iterable[bytes], check_health: bool = True) -> None:
        writer = self._writer
        if writer is None or not (self.is_connected and self.socket_timeout and isinstance(command, (bytes, list))):
            await super().send_packed_command(command, check_health)
            return
        if check_health:
            await self.check_health()  # type: ignore[no-untyped-call]
        try:
            writer.writelines([command] if isinstance(command, bytes) else command)
            if writer.transport.get_write_buffer_size():
                await asyncio.wait_for(writer.drain(), self.socket_timeout)
            else:
                # Cannot wait: drain only raises what the transport met (a connection lost).
                await writer.drain()
        except TimeoutError:
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            raise RedisConnectionError(f"Error while writing to socket: {exc}.") from exc
        except BaseException:
            # Part of the command may have gone out: the connection cannot be used again.
            await self.disconnect(nowait=True)
            raise
