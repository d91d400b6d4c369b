"""Every Redis key and channel the catalog uses.

Layout, cluster-safe: `tenk:catalog:product:{<id>}` (the cached row) and `tenk:catalog:product:{<id>}:gen`
(its write generation), and `tenk:catalog:product:{<id>}:lsn` (the primary's WAL position after its latest
write, for read replicas). The hash tag is the product id, so a product's two keys share one slot and the
scripts and MGET below, which touch one product's pair, never cross slots; different products spread
over the whole cluster. An invalidation of many products runs one script per slot (`invalidation.py`).
"""

from __future__ import annotations

from redis.crc import key_slot

# Cached product JSON, or b"" for "no such product" (negative entry). Lives redis_ttl_s (+ jitter),
# or negative_ttl_s; deleted by every write to the product.
_PRODUCT = "tenk:catalog:product:"
# Write generation of a product, INCRed by every write. A reader that filled the cache from an older
# generation must not store it (see `FILL_IF_UNCHANGED`). Expires long after any read could take.
_GENERATION_SUFFIX = ":gen"
GENERATION_TTL_S = 3600
# The primary's WAL position (bytes, as an integer) right after the product's latest write committed:
# a read replica may fill the cache only once it has replayed that far (see `tenk.catalog.replicas`).
# Set by the invalidation, kept as long as the generation.
_WRITTEN_LSN_SUFFIX = ":lsn"
# Pub/sub: product ids whose per-process copies must be dropped now.
INVALIDATE_CHANNEL = "tenk:catalog:invalidate"


def product_key(product_id: int) -> str:
    return f"{_PRODUCT}{{{product_id}}}"


def generation_key(product_id: int) -> str:
    return f"{_PRODUCT}{{{product_id}}}{_GENERATION_SUFFIX}"


def product_slot(product_id: int) -> int:
    """The cluster slot of the product's keys (on one server: just a way to group them)."""
    return int(key_slot(product_key(product_id).encode()))


def written_lsn_key(product_id: int) -> str:
    return f"{_PRODUCT}{{{product_id}}}{_WRITTEN_LSN_SUFFIX}"


# KEYS[1] product key, KEYS[2] generation key; ARGV[1] generation seen before the DB read
# ("" for none), ARGV[2] value, ARGV[3] ttl in ms. Its only write is the SET, so a full Redis refuses
# the fill outright (OOM): filling is optional, invalidating (below) is not.
FILL_IF_UNCHANGED = """
local gen = redis.call('GET', KEYS[2]) or ''
if gen == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""

# KEYS: product key, generation key, written-LSN key, for each product (all in one slot); ARGV[1]
# generation TTL in ms, ARGV[2] the channel ("": the caller publishes after, see `tenk.pubsub`), ARGV[3]
# the primary's WAL position after the write ("0": not tracked), ARGV[4..] the message for each product
# (its id, perhaps asking for a receipt: `Broadcast.request`). For each: drop the cached copy, bump the
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
