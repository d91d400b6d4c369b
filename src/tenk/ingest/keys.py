"""Every Redis key the ingest path uses."""

from __future__ import annotations

# The event stream. Entries live until every consumer group has acknowledged them; workers then
# trim them (XTRIM MINID). Never capped by length: a cap would drop events nobody has written yet.
STREAM = "tenk:ingest:events"
# The consumer group of the Postgres writers. Created (from id 0) by the API and by each worker; lives
# as long as the stream.
GROUP = "tenk-writers"
# The field that holds one encoded event in a stream entry (see `codec.py`).
FIELD = b"e"
# Hash of running totals: `added` and `acked` (entries added to the stream, and acknowledged by the
# writers' group, each counted in the same script as the command itself, so their difference is the
# exact backlog on any Redis version), plus rows_written, dead_letters and last_flush_* for
# /ingest/stats. No expiry: it is small, and lives as long as the stream.
STATS = "tenk:ingest:stats"

# KEYS[1] the stream, KEYS[2] the stats hash; ARGV the encoded events. One round trip for a whole
# batch. A `noeviction` Redis that is out of memory refuses the script at its first XADD and lets it
# finish once it has written, so a batch is added whole or not at all.
XADD_MANY = """
for i = 1, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'e', ARGV[i])
end
redis.call('HINCRBY', KEYS[2], 'added', #ARGV)
return #ARGV
"""

# KEYS[1] the stream, KEYS[2] the stats hash; ARGV[1] the group, ARGV[2] the entry ids joined by
# spaces (one argument packs far faster than thousands). Counts only the entries that were still
# pending, so a redelivered entry is not acknowledged twice in the totals.
XACK_COUNTED = """
local acked, ids = 0, {}
for id in string.gmatch(ARGV[2], '%S+') do
  ids[#ids + 1] = id
  if #ids == 1000 then
    acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
    ids = {}
  end
end
if #ids > 0 then
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
end
redis.call('HINCRBY', KEYS[2], 'acked', acked)
return acked
"""
