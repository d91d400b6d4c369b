"""The catalog's SQL. Rows come back as JSON built by Postgres, ready to cache as bytes."""

from __future__ import annotations

# Postgres renders the JSON once (compact, via row_to_json); we cache and serve those bytes as they are.
_FIELDS = "id, sku, name, description, price_cents, stock, updated_at"
_PRODUCT_JSON = f"(SELECT row_to_json(p)::text FROM (SELECT {_FIELDS}) AS p)"

PRODUCT_BY_ID = f"SELECT {_PRODUCT_JSON} FROM products WHERE id = $1"
# The reads of one event-loop turn together (tenk.catalog.batched_reads).
PRODUCTS_BY_IDS = f"SELECT id, {_PRODUCT_JSON} FROM products WHERE id = ANY($1::bigint[])"

INSERT_PRODUCT = f"""
INSERT INTO products (sku, name, description, price_cents, stock)
VALUES ($1, $2, $3, $4, $5)
RETURNING {_PRODUCT_JSON}
"""

REPLACE_PRODUCT = f"""
UPDATE products
SET sku = $2, name = $3, description = $4, price_cents = $5, stock = $6, updated_at = now()
WHERE id = $1
RETURNING {_PRODUCT_JSON}
"""

# COALESCE keeps the fields a PATCH did not send; the schema forbids explicit nulls.
PATCH_PRODUCT = f"""
UPDATE products
SET sku = COALESCE($2, sku), name = COALESCE($3, name), description = COALESCE($4, description),
    price_cents = COALESCE($5, price_cents), stock = COALESCE($6, stock), updated_at = now()
WHERE id = $1
RETURNING {_PRODUCT_JSON}
"""

PRODUCT_PAGE = f"SELECT id, {_PRODUCT_JSON} FROM products WHERE id > $1 ORDER BY id LIMIT $2"

DELETE_PRODUCT = "DELETE FROM products WHERE id = $1 RETURNING id"
# The catalogue's id range (tenk.catalog.ceiling): one backward step of the primary key index.
HIGHEST_PRODUCT_ID = "SELECT coalesce(max(id), 0) FROM products"
# The invalidation outbox (migration 0003): records the products trigger writes with every change.
# With the primary's WAL position, read after the write committed, so at or past its commit record: a
# replica that has replayed that far sees the write (tenk.catalog.replicas).
_WAL_POSITION = "(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
PENDING_INVALIDATION = (
    f"SELECT (SELECT seq FROM catalog_invalidations WHERE product_id = $1) AS seq, {_WAL_POSITION} AS lsn"
)
# The position is read after the snapshot, so past the commit of every record the query sees.
PENDING_INVALIDATIONS = (
    f"SELECT product_id, seq, {_WAL_POSITION} AS lsn FROM catalog_invalidations ORDER BY seq LIMIT $1"
)
# On a replica: has it replayed the primary's WAL up to $1? (Not in recovery: NULL, so no.) Asked
# before the read, in a statement of its own: the read's snapshot, taken after, then includes the write.
REPLAYED_PAST = "SELECT COALESCE(pg_last_wal_replay_lsn() - '0/0'::pg_lsn >= $1::bigint, false)"
# Only the records that were delivered: a write that re-armed a record meanwhile changed its seq.
SETTLE_INVALIDATIONS = """
DELETE FROM catalog_invalidations AS c
USING unnest($1::bigint[], $2::bigint[]) AS done (product_id, seq)
WHERE c.product_id = done.product_id AND c.seq = done.seq
"""
