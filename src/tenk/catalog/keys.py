"""Every Redis key and channel the catalog uses."""

from __future__ import annotations

# Cached product JSON, or b"" for "no such product" (negative entry). Lives redis_ttl_s (+ jitter),
# or negative_ttl_s; deleted by every write to the product.
_PRODUCT = "tenk:catalog:product:"
# Write generation of a product, INCRed by every write. A reader that filled the cache from an older
# generation must not store it (see `FILL_IF_UNCHANGED`). Expires long after any read could take.
_GENERATION_SUFFIX = ":gen"
GENERATION_TTL_S = 3600
# Pub/sub: product ids whose per-process copies must be dropped now.
INVALIDATE_CHANNEL = "tenk:catalog:invalidate"


def product_key(product_id: int) -> str:
    return f"{_PRODUCT}{product_id}"


def generation_key(product_id: int) -> str:
    return f"{_PRODUCT}{product_id}{_GENERATION_SUFFIX}"


# KEYS[1] product key, KEYS[2] generation key; ARGV[1] generation seen before the DB read
# ("" for none), ARGV[2] value, ARGV[3] ttl in ms.
FILL_IF_UNCHANGED = """
local gen = redis.call('GET', KEYS[2]) or ''
if gen == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
