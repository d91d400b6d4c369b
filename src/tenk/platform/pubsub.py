"""A channel every API process listens on: classic pub/sub on one server, sharded on a cluster, with
receipts: a publisher may wait until every receiver has confirmed that it applied its message.

Order. On one Redis the writer's script PUBLISHes itself, right after its DEL, so the message can
never overtake the write it announces. On a cluster PUBLISH would be broadcast over the cluster bus to
every node, and a script may only SPUBLISH to a channel in its own keys' slot, which one fixed channel
is not. So there the script publishes nothing (`in_script_channel` is empty), and `publish_after` sends
SPUBLISH once the scripts have returned: the order holds, and the messages go only through the shard
that owns the channel. Sharded pub/sub needs Redis >= 7 (or Valkey) on the cluster.

Receipts. A message that wants confirming carries a ticket and its publisher's reply channel
(`request`); each receiver, once its callback has applied the message, publishes the ticket there
(several tickets share one message). The reply channel is `{<channel>}:ack:<token>`: its hash tag puts
it in the channel's own slot, so on a cluster every confirmation goes through the same shard as the
messages, and one connection per process subscribes to both. A process confirms its own messages
without a round trip. The publisher learns how many to wait for from PUBLISH / SPUBLISH, which answer
the number of clients the message went to:
- one Redis: every subscriber, which is exact;
- a cluster, SPUBLISH: the clients of the node it ran on, the slot's primary. redis-py sends every
  SSUBSCRIBE to the primary (never to a replica), so that is every tenk process, except during a
  failover or a slot migration, when a subscriber still on the old node is not counted, so not
  waited for (it still gets the message if the old node forwards it, and drops its cache when it
  re-subscribes);
- classic PUBLISH on a cluster, which tenk never sends, would count the publishing node's clients
  only, not those the cluster bus reaches on other nodes: a wait on it would end early. That is one
  reason a cluster gets sharded pub/sub here.
Every client subscribed to the channel is counted, tenk or not: a stray `SUBSCRIBE` from redis-cli,
or a process too old to confirm, makes every wait run to its timeout (which the caller counts).

Subscribers read through `subscription`, which is SUBSCRIBE or SSUBSCRIBE to match. Messages sent
while a subscriber was disconnected are lost either way: callers drop what they cached on every
(re)subscribe.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol

from redis.asyncio import Redis

from tenk.platform.connections import connect_redis, is_cluster

# Messages taken in one go (what had already arrived) before their confirmations are sent together.
_BATCH = 256
_SEPARATOR = b" "


class _Raw(Protocol):
    async def next_message(self, wait_s: float) -> tuple[bytes, bytes] | None: ...


class _Classic:
    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    async def next_message(self, wait_s: float) -> tuple[bytes, bytes] | None:
        message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=wait_s)
        if message is None or message["type"] != "message":
            return None
        return message["channel"], message["data"]


class _Sharded:
    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    async def next_message(self, wait_s: float) -> tuple[bytes, bytes] | None:
        message = await self._pubsub.get_sharded_message(ignore_subscribe_messages=True, timeout=wait_s)
        if message is None or message["type"] != "smessage":
            return None
        return message["channel"], message["data"]


class Receipt:
    """The confirmations of one publication, counted as they arrive: some may come before the
    publisher knows how many receivers there are."""

    def __init__(self, ticket: bytes) -> None:
        self.ticket = ticket
        self.confirmed = 0
        self._expected: int | None = None
        self._all_in = asyncio.Event()

    def confirm(self) -> None:
        self.confirmed += 1
        self._check()

    def _check(self) -> None:
        if self._expected is not None and self.confirmed >= self._expected:
            self._all_in.set()

    async def wait(self, receivers: int, timeout_s: float) -> bool:
        """True once `receivers` confirmations are in; False if they are not within `timeout_s`."""
        self._expected = receivers
        self._check()
        if self._all_in.is_set():
            return True
        try:
            async with asyncio.timeout(timeout_s):
                await self._all_in.wait()
        except TimeoutError:
            return False
        return True


class Subscription:
    def __init__(self, broadcast: Broadcast, raw: _Raw) -> None:
        self._broadcast = broadcast
        self._raw = raw

    async def receive(self, apply: Callable[[bytes], None], wait_s: float) -> None:
        """Wait up to `wait_s` for messages; `apply` each that has arrived, in order, then confirm those
        that asked. Raises the REDIS_DOWN family when Redis goes away."""
        received = await self._raw.next_message(wait_s)
        replies: defaultdict[bytes, list[bytes]] = defaultdict(list)
        taken = 0
        while received is not None:
            channel, data = received
            if channel == self._broadcast.reply_channel:
                self._broadcast.confirmed(data.split(_SEPARATOR))
            else:
                body, reply_channel, ticket = _parse(data)
                apply(body)
                if reply_channel.startswith(self._broadcast.reply_prefix) and ticket:
                    replies[reply_channel].append(ticket)
            taken += 1
            # Whatever has already arrived, without waiting: its confirmations then go out together.
            received = await self._raw.next_message(0) if taken < _BATCH else None
        if replies:
            await self._broadcast.send_confirmations(replies)


def _parse(data: bytes) -> tuple[bytes, bytes, bytes]:
    """(body, reply channel, ticket); the last two empty for a message nobody waits on."""
    parts = data.split(_SEPARATOR)
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return data, b"", b""


class Broadcast:
    def __init__(self, redis: Redis, channel: str) -> None:
        self.redis = redis
        self.channel = channel
        self.sharded = is_cluster(redis)
        # One reply channel per Broadcast (so per process), in the channel's slot (see the docstring).
        self.reply_prefix = f"{{{channel}}}:ack:".encode()
        self.reply_channel = self.reply_prefix + secrets.token_hex(8).encode()
        self._tickets = itertools.count(1)
        self._receipts: dict[bytes, Receipt] = {}

    @property
    def in_script_channel(self) -> str:
        """The channel a script should PUBLISH to itself, or "" when `publish_after` sends instead."""
        return "" if self.sharded else self.channel

    @contextmanager
    def receipt(self) -> Iterator[Receipt]:
        """A receipt to `request` confirmations with; confirmations that come after the block are ignored."""
        receipt = Receipt(str(next(self._tickets)).encode())
        self._receipts[receipt.ticket] = receipt
        try:
            yield receipt
        finally:
            del self._receipts[receipt.ticket]

    def request(self, body: str, receipt: Receipt | None) -> str:
        """What to publish for `body` (no spaces in it): the body alone, or with what its receivers
        need to confirm it."""
        if receipt is None:
            return body
        return f"{body} {self.reply_channel.decode()} {receipt.ticket.decode()}"

    def confirmed(self, tickets: Sequence[bytes]) -> None:
        for ticket in tickets:
            receipt = self._receipts.get(ticket)
            if receipt is not None:
                receipt.confirm()

    async def send_confirmations(self, replies: dict[bytes, list[bytes]]) -> None:
        own = replies.pop(self.reply_channel, None)
        if own:
            self.confirmed(own)
        if not replies:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for reply_channel, tickets in replies.items():
                message = _SEPARATOR.join(tickets)
                if self.sharded:
                    pipe.spublish(reply_channel, message)
                else:
                    pipe.publish(reply_channel, message)
            await pipe.execute()

    async def publish_after(self, messages: Sequence[str]) -> int:
        """Publish what a script could not (sharded mode); a no-op when the script already did. How
        many clients the messages went to (summed over the messages)."""
        if not self.sharded or not messages:
            return 0
        async with self.redis.pipeline(transaction=False) as pipe:
            for message in messages:
                pipe.spublish(self.channel, message)
            receivers = await pipe.execute()
        return sum(int(count) for count in receivers)

    @asynccontextmanager
    async def subscription(self) -> AsyncIterator[Subscription]:
        """Subscribed on entry (to the channel and to this process's reply channel); raises the
        REDIS_DOWN family when Redis goes away."""
        await connect_redis(self.redis)
        async with self.redis.pubsub() as pubsub:
            if self.sharded:
                await pubsub.ssubscribe(self.channel, self.reply_channel)
                yield Subscription(self, _Sharded(pubsub))
            else:
                await pubsub.subscribe(self.channel, self.reply_channel)
                yield Subscription(self, _Classic(pubsub))
