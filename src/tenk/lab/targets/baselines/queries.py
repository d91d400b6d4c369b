"""The baselines' SQL, in psycopg's %s style. Rows come back as dicts for pydantic to validate, as the studies did."""

from __future__ import annotations

_PRODUCT = "id, sku, name, description, price_cents, stock, updated_at"
_TASK = "id, title, notes, done, created_at, updated_at"

PRODUCT_BY_ID = f"SELECT {_PRODUCT} FROM products WHERE id = %s"
PRODUCT_PAGE = f"SELECT {_PRODUCT} FROM products WHERE id > %s ORDER BY id LIMIT %s"
INSERT_PRODUCT = f"""
INSERT INTO products (sku, name, description, price_cents, stock)
VALUES (%s, %s, %s, %s, %s)
RETURNING {_PRODUCT}
"""

TASK_BY_ID = f"SELECT {_TASK} FROM tasks WHERE id = %s"
TASK_PAGE = f"SELECT {_TASK} FROM tasks WHERE id > %s ORDER BY id LIMIT %s"
INSERT_TASK = f"INSERT INTO tasks (title, notes, done) VALUES (%s, %s, %s) RETURNING {_TASK}"

# The same ranking as tenk's search, so both answer with the same hits.
SEARCH_PRODUCTS = """
SELECT id, sku, name, price_cents, round(ts_rank_cd(search, query)::numeric, 4)::float8 AS rank
FROM products, websearch_to_tsquery('english', %s) AS query
WHERE search @@ query
ORDER BY ts_rank_cd(search, query) DESC, id
LIMIT %s
"""

# One row per request, committed at once; a replayed event_id is a no-op, as in tenk's ingest.
INSERT_EVENT = """
INSERT INTO events (event_id, source, ts, payload) VALUES (%s, %s, %s, %s)
ON CONFLICT (event_id, ts) DO NOTHING
"""
