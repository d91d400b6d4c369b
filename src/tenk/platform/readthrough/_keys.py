"""Every Redis key, channel and script of a read-through cache: one namespace per cache, one script set for all.

Layout, cluster-safe, for a cache named `<name>` of `<item>`s: `tenk:<name>:<item>:{<id>}` (the cached
value), `tenk:<name>:<item>:{<id>}:gen` (its write generation) and `tenk:<name>:<item>:{<id>}:lsn` (the
primary's WAL position after its latest write, for read replicas). The hash tag is the id, so an item's
keys share one slot and the scripts and MGET below, which touch one item's keys, never cross slots;
different items spread over the whole cluster. An invalidation of many items runs one script per slot
(`_invalidation.py`). The channel `tenk:<name>:invalidate` carries the ids whose per-process copies go.
"""

from __future__ import annotations

from redis.crc import key_slot

# Write generation of an item, INCRed by every write. A reader that filled the cache from an older
# generation must not store it (see `FILL_IF_UNCHANGED`). Expires long after any read could take.
_GENERATION_SUFFIX = ":gen"
GENERATION_TTL_S = 3600
# The primary's WAL position (bytes, as an integer) right after the item's latest write committed: a
# read replica may fill the cache only once it has replayed that far (`ReadCache._select`). Set by the
# invalidation, kept as long as the generation.
_WRITTEN_LSN_SUFFIX = ":lsn"


class KeySpace:
    """The keys and channel of one cache: `KeySpace("catalog", "product").value_key(7)` is
    `tenk:catalog:product:{7}`."""

    def __init__(self, name: str, item: str) -> None:
        self.name = name
        self.item = item
        self._prefix = f"tenk:{name}:{item}:"
        self.channel = f"tenk:{name}:invalidate"

    def value_key(self, item_id: int) -> str:
        """The cached value, or b"" for "no such item" (a negative entry). Lives redis_ttl_s (+ jitter), or
        negative_ttl_s; deleted by every write to the item."""
        return f"{self._prefix}{{{item_id}}}"

    def generation_key(self, item_id: int) -> str:
        return f"{self._prefix}{{{item_id}}}{_GENERATION_SUFFIX}"

    def written_lsn_key(self, item_id: int) -> str:
        return f"{self._prefix}{{{item_id}}}{_WRITTEN_LSN_SUFFIX}"

    def lookup_keys(self, item_id: int) -> tuple[str, str, str]:
        """What a lookup reads, in the order it answers: the cached value, the generation, the written LSN."""
        return self.value_key(item_id), self.generation_key(item_id), self.written_lsn_key(item_id)

    def slot(self, item_id: int) -> int:
        """The cluster slot of the item's keys (on one server: just a way to group them)."""
        return int(key_slot(self.value_key(item_id).encode()))


# KEYS[1] value key, KEYS[2] generation key; ARGV[1] generation seen before the DB read ("" for none),
# ARGV[2] value, ARGV[3] ttl in ms. Its only write is the SET, so a full Redis refuses the fill
# outright (OOM): filling is optional, invalidating (below) is not.
FILL_IF_UNCHANGED = """
local gen = redis.call('GET', KEYS[2]) or ''
if gen == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""

# KEYS: value key, generation key, written-LSN key, for each item (all in one slot); ARGV[1] generation
# TTL in ms, ARGV[2] the channel ("": the caller publishes after, see `tenk.platform.pubsub`), ARGV[3] the
# primary's WAL position after the write ("0": not tracked), ARGV[4..] the message for each item (its
# id, perhaps asking for a receipt: `Broadcast.request`). For each: drop the cached copy, bump the
# generation (so a fill that read Postgres before the write is refused), raise the written LSN (never
# lower it: deliveries may come out of order), publish the message. Returns how many clients the
# messages went to (0 when the caller publishes), which is how many confirmations a writer waits for.
#
# Why a script and not MULTI: at maxmemory with noeviction, Redis refuses every command queued in a
# MULTI, DEL included, so the whole invalidation is lost. A script is refused only if its *first write*
# needs memory; once it has written, Redis lets it finish rather than stop it halfway (Redis 6.2 and 7,
# scripts without flags). So the DEL, which frees memory, comes first, and the few bytes of INCR after
# it are admitted even when Redis is full. PUBLISH needs no memory at all.
INVALIDATE = """
local lsn = tonumber(ARGV[3])
local receivers = 0
for i = 1, #KEYS, 3 do
  redis.call('DEL', KEYS[i])
  redis.call('INCR', KEYS[i + 1])
  redis.call('PEXPIRE', KEYS[i + 1], ARGV[1])
  if lsn > 0 and lsn > (tonumber(redis.call('GET', KEYS[i + 2]) or '0') or 0) then
    redis.call('SET', KEYS[i + 2], ARGV[3], 'PX', ARGV[1])
  end
  if ARGV[2] ~= '' then
    receivers = receivers + redis.call('PUBLISH', ARGV[2], ARGV[3 + (i + 2) / 3])
  end
end
return receivers
"""
