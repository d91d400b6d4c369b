from __future__ import annotations

# websearch_to_tsquery accepts anything a person types (quotes, "or", "-"), never a syntax error.
# A query that is all stop words becomes an empty tsquery, which matches nothing.
SEARCH_PRODUCTS = """
SELECT coalesce(json_agg(hit ORDER BY hit.rank DESC, hit.id), '[]')::text
FROM (
    SELECT id, sku, name, price_cents, round(ts_rank_cd(search, query)::numeric, 4) AS rank
    FROM products, websearch_to_tsquery('english', $1) AS query
    WHERE search @@ query
    ORDER BY ts_rank_cd(search, query) DESC, id
    LIMIT $2
) AS hit
"""
