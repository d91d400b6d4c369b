"""The catalog's SQL. Rows come back as JSON built by Postgres, ready to cache as bytes."""

from __future__ import annotations

# Postgres renders the JSON once (compact, via row_to_json); we cache and serve those bytes as they are.
_FIELDS = "id, sku, name, description, price_cents, stock, updated_at"
_PRODUCT_JSON = f"(SELECT row_to_json(p)::text FROM (SELECT {_FIELDS}) AS p)"

PRODUCT_BY_ID = f"SELECT {_PRODUCT_JSON} FROM products WHERE id = $1"
# The reads of one event-loop turn together (`service.PRODUCTS`'s load_many).
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
