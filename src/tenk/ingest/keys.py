"""Every Redis key the ingest path uses.

Layout, cluster-safe: the stream is split into TENK_INGEST_SHARDS shards, and shard `n` owns two keys,
`tenk:ingest:{ingest-<n>}:events` (its stream) and `tenk:ingest:{ingest-<n>}:stats` (its counters). The
hash tag is the shard, so a shard's stream and counters share one slot and every script below (KEYS[1]
a stream, KEYS[2] its stats) runs on one node; different shards hash to different slots, so with
enough shards they land on different masters. An event's shard comes from its `source` (`shard_of`),
so one source's events keep their order within one stream. Shard 0 also keeps the flush-wide
counters (rows_written, dead_letters, conflicts, last_flush_*). Before TENK_INGEST_SHARDS existed the
keys were `tenk:ingest:events` and `tenk:ingest:stats`: drain the backlog before upgrading.
"""

from __future__ import annotations

import zlib


def stream_key(shard: int) -> str:
    return f"tenk:ingest:{{ingest-{shard}}}:events"


def stats_key(shard: int) -> str:
    return f"tenk:ingest:{{ingest-{shard}}}:stats"


def shard_of(entry: bytes, shards: int) -> int:
    """The shard of an encoded entry: a stable hash of its source (the entry's second field)."""
    if shards == 1:
        return 0
    return zlib.crc32(entry.split(b"\t", 2)[1]) % shards


def writer_stream_id(shard: int, stream_id: bytes) -> bytes:
    """The id Postgres knows an entry by (staging, dead letters): stream ids repeat across shards."""
    return stream_id if shard == 0 else b"%d/%s" % (shard, stream_id)


# The event stream of shard 0. Entries live until every consumer group has acknowledged them: deleted as they
# are acknowledged when the writers' group is the only one (see XACK_COUNTED), otherwise trimmed by
# the workers (XTRIM MINID). Never capped by length: a cap would drop events nobody has written yet.
STREAM = stream_key(0)
# The highest TENK_INGEST_SHARDS any API or worker has used on this Redis, as a decimal string. An API
# records its count before it adds its first entry, and workers read (and trim, count and reconcile)
# every shard up to it, whatever they are configured with: an event accepted into shard 3 is written
# even after every process restarts with one shard. It never decreases; a shard left empty costs a
# worker one blocked read. No hash tag: it shares no script with any other key.
SHARDS_SEEN = "tenk:ingest:shards"
# KEYS[1] SHARDS_SEEN, ARGV[1] the caller's shard count: records the larger, returns what is recorded now.
RECORD_SHARDS = """
local seen = tonumber(redis.call('GET', KEYS[1]) or '0')
local count = tonumber(ARGV[1])
if count > seen then
  redis.call('SET', KEYS[1], count)
  return count
end
return seen
"""
# The consumer group of the Postgres writers. Created (from id 0) by the API and by each worker; lives
# as long as the stream.
GROUP = "tenk-writers"
# The field that holds one encoded event in a stream entry (see `codec.py`).
FIELD = b"e"
# With tracing on, the field after FIELD: the W3C trace context of the span that accepted the event,
# `traceparent` or `traceparent tracestate` (a traceparent holds no space), so that the worker's write
# can link to it (`tenk.ingest.tracelinks`). Absent with tracing off, and in entries of older versions.
TRACE_FIELD = b"t"
# Hash of running totals: `added` and `acked` (entries added to the stream, and acknowledged by the
# writers' group) and `added_bytes` and `acked_bytes` (the same, in encoded bytes), each counted in the
# same script as the command itself, so their differences are the exact backlog on any Redis version.
# Entries that leave the pending list another way (a consumer deleted while holding them, an entry
# deleted while pending) would inflate them for ever, so workers reconcile them with RECONCILE. Also
# rows_written, dead_letters, conflicts, vanished, reconciled and last_flush_* for /ingest/stats. No
# expiry: it is small, and lives as long as the stream.
STATS = stats_key(0)

# The backlog is bounded by refusing a batch in the same script that would add it: XADD_MANY returns
# this instead of a count when the backlog's bytes or entries would pass their caps. Checked here, not
# only against the API's polled view of the backlog, so that no process, however fast it posts between
# two polls, can push the backlog past its cap.
BACKLOG_FULL = -1

# Whether adding `size` bytes in `count` entries keeps the backlog within the byte cap ARGV[1] and the
# entry cap ARGV[2]; the backlog is what was added and not yet acknowledged, per the stats hash KEYS[2].
_FITS = """
local function fits(size, count)
  local totals = redis.call('HMGET', KEYS[2], 'added_bytes', 'acked_bytes', 'added', 'acked')
  local held_bytes = (tonumber(totals[1]) or 0) - (tonumber(totals[2]) or 0)
  local held = (tonumber(totals[3]) or 0) - (tonumber(totals[4]) or 0)
  return held_bytes + size <= tonumber(ARGV[1]) and held + count <= tonumber(ARGV[2])
end
"""

# KEYS[1] the stream, KEYS[2] the stats hash; ARGV[1] the byte cap and ARGV[2] the entry cap of the
# backlog, ARGV[3..] the encoded events. One round trip for a whole batch, added whole or refused
# whole: over a cap it adds nothing, so the stream can never push a `noeviction` Redis into OOM (a
# Redis that is out of memory for other reasons refuses the script at its first XADD and lets it
# finish once it has written).
XADD_MANY = (
    _FITS
    + """
local size = 0
for i = 3, #ARGV do
  size = size + #ARGV[i]
end
if not fits(size, #ARGV - 2) then
  return -1
end
for i = 3, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'e', ARGV[i])
end
redis.call('HINCRBY', KEYS[2], 'added', #ARGV - 2)
redis.call('HINCRBY', KEYS[2], 'added_bytes', size)
return #ARGV - 2
"""
)

# XADD_MANY with trace contexts, for an API with tracing on: ARGV[1] and ARGV[2] the caps, then per request
# its trace context ('' when it has none: the span was not sampled), its number of events n, and its
# n encoded events. An entry's size is the bytes of its field values (as RECONCILE counts them): the
# event, plus the context when it has one. The plain script stays as it was: tracing off costs nothing.
XADD_MANY_TRACED = (
    _FITS
    + """
local size, count, i = 0, 0, 3
while i <= #ARGV do
  local n = tonumber(ARGV[i + 1])
  size = size + #ARGV[i] * n
  for j = i + 2, i + 1 + n do
    size = size + #ARGV[j]
  end
  count = count + n
  i = i + 2 + n
end
if not fits(size, count) then
  return -1
end
i = 3
while i <= #ARGV do
  local context, n = ARGV[i], tonumber(ARGV[i + 1])
  for j = i + 2, i + 1 + n do
    if context == '' then
      redis.call('XADD', KEYS[1], '*', 'e', ARGV[j])
    else
      redis.call('XADD', KEYS[1], '*', 'e', ARGV[j], 't', context)
    end
  end
  i = i + 2 + n
end
redis.call('HINCRBY', KEYS[2], 'added', count)
redis.call('HINCRBY', KEYS[2], 'added_bytes', size)
return count
"""
)

# KEYS[1] the stream, KEYS[2] the stats hash; ARGV[1] the group, ARGV[2] the entry ids and ARGV[3]
# their encoded sizes, each joined by spaces (one argument packs far faster than thousands). Counts
# only the entries that were still pending, so a redelivered entry is not acknowledged twice in the
# totals; one XACK per id, because only that says which ids (and so which bytes) were still pending.
# With the writers' group the only one, the acknowledged entries are deleted at once: trimming keeps
# everything after the oldest pending entry, so one entry stuck pending (its consumer died, and is
# not yet claimed) would otherwise pin every later entry in memory, however long since written.
XACK_COUNTED = """
local sizes = {}
for size in string.gmatch(ARGV[3], '%S+') do
  sizes[#sizes + 1] = tonumber(size)
end
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])
local alone = ok and #groups == 1
local acked, bytes, i, done = 0, 0, 0, {}
for id in string.gmatch(ARGV[2], '%S+') do
  i = i + 1
  if redis.call('XACK', KEYS[1], ARGV[1], id) == 1 then
    acked = acked + 1
    bytes = bytes + (sizes[i] or 0)
    if alone then
      done[#done + 1] = id
      if #done == 1000 then
        redis.call('XDEL', KEYS[1], unpack(done))
        done = {}
      end
    end
  end
end
if #done > 0 then
  redis.call('XDEL', KEYS[1], unpack(done))
end
redis.call('HINCRBY', KEYS[2], 'acked', acked)
redis.call('HINCRBY', KEYS[2], 'acked_bytes', bytes)
return acked
"""

# KEYS[1] the stream, KEYS[2] the stats hash; ARGV[1] the group, ARGV[2] the most entries to look at.
# Sets `acked` and `acked_bytes` so that added - acked is the ground truth: the group's pending
# entries (XPENDING) plus its undelivered ones, those after its last-delivered id (Redis 6.2 has no
# XINFO lag). Atomic, so nothing moves while it counts. Gives up (returns nil) rather than block Redis
# when more than ARGV[2] entries are backlogged; a worker catches up, and a counter inflated past the
# cap stops new entries, so the backlog it has to count soon shrinks below that. Returns the
# corrections {entries, bytes}: positive when the counter had overcounted.
RECONCILE = """
local limit = tonumber(ARGV[2])
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])
if not ok then
  return nil
end
local last, pending = nil, 0
for _, group in ipairs(groups) do
  local info = {}
  for i = 1, #group, 2 do
    info[group[i]] = group[i + 1]
  end
  if info['name'] == ARGV[1] then
    last, pending = info['last-delivered-id'], tonumber(info['pending'])
  end
end
if last == nil or pending > limit then
  return nil
end
local function size(entry)
  local bytes = 0
  for i = 2, #entry[2], 2 do
    bytes = bytes + #entry[2][i]
  end
  return bytes
end
local bytes, start = 0, '-'
while true do
  local page = redis.call('XPENDING', KEYS[1], ARGV[1], start, '+', 100)
  for _, row in ipairs(page) do
    local found = redis.call('XRANGE', KEYS[1], row[1], row[1])
    if #found == 1 then
      bytes = bytes + size(found[1])
    end
  end
  if #page < 100 then
    break
  end
  start = '(' .. page[#page][1]
end
local count = pending
start = '(' .. last
while true do
  local page = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 100)
  for _, entry in ipairs(page) do
    bytes = bytes + size(entry)
  end
  count = count + #page
  if count > limit then
    return nil
  end
  if #page < 100 then
    break
  end
  start = '(' .. page[#page][1]
end
local totals = redis.call('HMGET', KEYS[2], 'added', 'acked', 'added_bytes', 'acked_bytes')
local added, acked = tonumber(totals[1]) or 0, tonumber(totals[2]) or 0
local added_bytes, acked_bytes = tonumber(totals[3]) or 0, tonumber(totals[4]) or 0
local drift = added - acked - count
local drift_bytes = added_bytes - acked_bytes - bytes
if drift ~= 0 or drift_bytes ~= 0 then
  redis.call('HSET', KEYS[2], 'acked', added - count, 'acked_bytes', added_bytes - bytes)
  redis.call('HINCRBY', KEYS[2], 'reconciled', 1)
end
return {drift, drift_bytes}
"""
