"""A channel every API process listens on: classic pub/sub on one server, sharded on a cluster.

On one Redis the writer's script PUBLISHes itself, right after its DEL, so the message can never
overtake the write it announces. On a cluster PUBLISH would be broadcast over the cluster bus to every
node, and a script may only SPUBLISH to a channel in its own keys' slot, which one fixed channel is
not. So there the script publishes nothing (`in_script_channel` is empty), and `publish_after` sends
SPUBLISH once the scripts have returned: the order holds, and the messages go only through the shard
that owns the channel. Sharded pub/sub needs Redis >= 7 (or Valkey) on the cluster.

Subscribers read through `subscription`, which is SUBSCRIBE or SSUBSCRIBE to match. Messages sent
while a subscriber was disconnected are lost either way: callers drop what they cached on every
(re)subscribe.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from redis.asyncio import Redis

from tenk.connections import connect_redis, is_cluster


class Subscription(Protocol):
    async def next_message(self, wait_s: float) -> bytes | None: ...


class _Classic:
    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    async def next_message(self, wait_s: float) -> bytes | None:
        message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=wait_s)
        return message["data"] if message is not None and message["type"] == "message" else None


class _Sharded:
    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    async def next_message(self, wait_s: float) -> bytes | None:
        message = await self._pubsub.get_sharded_message(ignore_subscribe_messages=True, timeout=wait_s)
        return message["data"] if message is not None and message["type"] == "smessage" else None


class Broadcast:
    def __init__(self, redis: Redis, channel: str) -> None:
        self.redis = redis
        self.channel = channel
        self.sharded = is_cluster(redis)

    @property
    def in_script_channel(self) -> str:
        """The channel a script should PUBLISH to itself, or "" when `publish_after` sends instead."""
        return "" if self.sharded else self.channel

    async def publish_after(self, messages: Sequence[str]) -> None:
        """Publish what a script could not (sharded mode); a no-op when the script already did."""
        if not self.sharded or not messages:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for message in messages:
                pipe.spublish(self.channel, message)
            await pipe.execute()

    @asynccontextmanager
    async def subscription(self) -> AsyncIterator[Subscription]:
        """Subscribed on entry; raises the REDIS_DOWN family when Redis goes away."""
        await connect_redis(self.redis)
        async with self.redis.pubsub() as pubsub:
            if self.sharded:
                await pubsub.ssubscribe(self.channel)
                yield _Sharded(pubsub)
            else:
                await pubsub.subscribe(self.channel)
                yield _Classic(pubsub)
