from __future__ import annotations

# websearch_to_tsquery accepts anything a person types (quotes, "or", "-"), never a syntax error.
# A query that is all stop words becomes an empty tsquery, which matches nothing.
# The rank is computed once per matching row, in the inner query; the outer one only renders JSON.
SEARCH_PRODUCTS = """
SELECT coalesce(json_agg(json_build_object(
           'id', id, 'sku', sku, 'name', name, 'price_cents', price_cents, 'rank', round(rank::numeric, 4)
       ) ORDER BY rank DESC, id), '[]')::text
FROM (
    SELECT id, sku, name, price_cents, ts_rank_cd(search, query) AS rank
    FROM products, websearch_to_tsquery('english', $1) AS query
    WHERE search @@ query
    ORDER BY rank DESC, id
    LIMIT $2
) AS hit
"""
