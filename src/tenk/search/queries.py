"""Full-text search over products: one statement per request that gives the same top results as ranking every match.

`RANK_CANDIDATES` ranks a bounded candidate set: for each word of the query the K best postings from
`search_postings` (migration 0005), in that word's own rank order (K for a page of ten results, in
proportion for larger pages: `candidates_for`), and, in a query of up to four words, for each pair
of words the 6K best products with both in their name. A key's postings are read by an index range scan however common
the word is, so the cost of a query no longer grows with the number of products that match it.
`ts_rank_cd` runs only over those candidates, and on the ones that match, with two ways around them:

- one word alone (41 % of the query set) needs no ranking at all: a posting's score is the rank
  ts_rank_cd gives that word, so the word's first `limit` postings are the answer;
- a query whose match the planner estimates at 6K rows or fewer (`search_match_estimate`, migration
  0007) has that match ranked in full, exactly: no dearer than ranking the candidates, which for
  words that seldom meet rarely hold `limit` matches.

When the candidates cannot be shown complete (only an `or` of words with fewer than K postings each
can be) and yield fewer hits than asked for, the same statement ranks the GIN match in full instead
(what `RANK_ALL_MATCHES`, the only query before, does): a second round trip would cost the API process
more than the gate costs Postgres.

websearch_to_tsquery accepts anything a person types (quotes, "or", "-"), never a syntax error.
A query that is all stop words becomes an empty tsquery, which matches nothing.
"""

from __future__ import annotations

import re

# TENK_SEARCH_CANDIDATES counts postings a word for a page of ten results; a larger page reads in
# proportion. Read at the page-of-ten figure, most multi-word queries found fewer matches among the
# candidates than a large page asks for and fell back to ranking every match, a far dearer statement
# than ranking the candidates (a74056c's message has the figures, at 1M products).
CANDIDATES_PER_PAGE_OF = 10


def candidates_for(limit: int, candidates: int) -> int:
    """Postings read a word for a page of `limit` results: `candidates`, more for pages over ten."""
    return candidates * max(limit, CANDIDATES_PER_PAGE_OF) // CANDIDATES_PER_PAGE_OF


# querytree() keeps the positive, indexable part of the query: `'kettl' & 'lamp'` for
# "kettle lamp -ceramic". Its quoted lexemes are the words whose postings are read.
RANK_CANDIDATES = """
WITH typed AS MATERIALIZED (
    SELECT query, querytree(query) AS tree, numnode(query) AS nodes FROM websearch_to_tsquery('english', $1) AS query
),
words AS (
    SELECT DISTINCT replace(quoted[1], '''''', '''') AS lexeme
    FROM typed, regexp_matches(typed.tree, '''((?:[^'']|'''')*)''', 'g') AS quoted
),
keys AS (
    SELECT lexeme AS key, true AS single FROM words
    UNION ALL
    SELECT first.lexeme || ' ' || second.lexeme, false
    FROM words AS first JOIN words AS second ON first.lexeme < second.lexeme
    -- Pairs only for a short query (people type one to three words): their number grows with the square
    -- of the words, and an `or` of 20 words within the 200 characters read 190 pairs' candidates, 27 ms of
    -- Postgres at 100k products against about 1 for a typical query. Past four words, words alone.
    WHERE (SELECT count(*) FROM words) <= 4
),
postings AS MATERIALIZED (
    SELECT keys.key, keys.single, top.product_id
    FROM keys LEFT JOIN LATERAL (
        SELECT product_id FROM search_postings WHERE search_postings.lexeme = keys.key
        ORDER BY score DESC, product_id
        -- A pair's postings are the products with both words in their name: each one holds both words,
        -- so they are the likeliest matches of any query that has the pair, and it reads six times more.
        LIMIT CASE WHEN keys.single THEN $3 ELSE 6 * $3 END
    ) AS top ON true
),
exhausted AS MATERIALIZED (
    SELECT key, single, count(product_id) AS found FROM postings GROUP BY key, single
),
-- A small match is ranked outright: when the planner's estimate of the GIN match (migration 0007, about
-- 50 µs) is at most 6K rows, as many as one pair's candidates, ranking them costs no more than ranking
-- those, and the candidates of words that seldom meet rarely hold `limit` matches anyway. The ranking is
-- then exact.
narrow AS MATERIALIZED (
    SELECT CASE WHEN typed.nodes <= 1 THEN false ELSE search_match_estimate(typed.query) <= 6 * $3 END AS yes FROM typed
),
candidates AS MATERIALIZED (
    SELECT DISTINCT product_id AS id FROM postings WHERE product_id IS NOT NULL
),
bounded AS MATERIALIZED (
    (SELECT product.id, product.sku, product.name, product.price_cents, ts_rank_cd(product.search, typed.query) AS rank
     FROM candidates
     -- OFFSET 0 keeps this a primary-key probe per candidate: flattened, the planner would match the
     -- GIN index against the whole table and join, which is the cost this query exists to avoid.
     CROSS JOIN LATERAL (SELECT * FROM products WHERE products.id = candidates.id OFFSET 0) AS product, typed
     WHERE typed.nodes <> 1 AND NOT (SELECT yes FROM narrow) AND product.search @@ typed.query
     ORDER BY rank DESC, product.id
     LIMIT $2)
    UNION ALL
    -- One word and nothing else: a posting's score is that word's rank, so its first postings are the answer.
    (SELECT product.id, product.sku, product.name, product.price_cents, top.score
     FROM typed, words
     CROSS JOIN LATERAL (
         SELECT product_id, score FROM search_postings WHERE search_postings.lexeme = words.lexeme
         ORDER BY score DESC, product_id
         LIMIT $2
     ) AS top
     JOIN products AS product ON product.id = top.product_id
     WHERE typed.nodes = 1)
),
-- Whether the answer is already in `bounded`: one word (or none), enough hits, or candidates known to
-- hold every match (an `or` of words that each have fewer than K postings).
settled AS MATERIALIZED (
    SELECT CASE WHEN typed.nodes <= 1 THEN true
                WHEN narrow.yes THEN false
                WHEN (SELECT count(*) FROM bounded) = $2 THEN true
                WHEN strpos(typed.tree, '|') > 0
                THEN (SELECT coalesce(bool_and(found < $3), false) FROM exhausted WHERE single)
                ELSE false END AS enough
    FROM typed, narrow
),
-- Otherwise the GIN match ranked in full (RANK_ALL_MATCHES), in this same statement: the gate is a
-- one-time filter, so this branch costs nothing when the candidates sufficed.
everything AS (
    SELECT id, sku, name, price_cents, ts_rank_cd(search, query) AS rank
    FROM products, websearch_to_tsquery('english', $1) AS query
    WHERE NOT (SELECT enough FROM settled) AND search @@ query
    ORDER BY rank DESC, id
    LIMIT $2
),
hits AS (
    SELECT * FROM bounded WHERE (SELECT enough FROM settled)
    UNION ALL
    SELECT * FROM everything
)
SELECT
    NOT (SELECT enough FROM settled) AS ranked_all,
    (SELECT coalesce(json_agg(json_build_object(
                'id', id, 'sku', sku, 'name', name, 'price_cents', price_cents, 'rank', round(rank::numeric, 4)
            ) ORDER BY rank DESC, id), '[]')::text
     FROM hits) AS items
"""

# A query that is one plain word (`ONE_WORD`; 41 % of the query set) needs none of RANK_CANDIDATES'
# machinery: its answer is the word's first postings. The same rows and ranks as RANK_CANDIDATES'
# one-word branch (and so as ranking every match), in less Postgres time than that branch takes
# (9a86b43's message has the figure). to_tsvector gives a letters-only word one lexeme, the one
# websearch_to_tsquery gives, or none for a stop word (NULL: no postings, no hits, as the empty tsquery
# matches nothing).
ONE_WORD = re.compile(r"\s*[A-Za-z]+\s*")
RANK_ONE_WORD = """
SELECT coalesce(json_agg(json_build_object(
           'id', product.id, 'sku', product.sku, 'name', product.name, 'price_cents', product.price_cents,
           'rank', round(top.score::numeric, 4)
       ) ORDER BY top.score DESC, top.product_id), '[]')::text
FROM (
    SELECT product_id, score FROM search_postings
    WHERE lexeme = (tsvector_to_array(to_tsvector('english', $1)))[1]
    ORDER BY score DESC, product_id
    LIMIT $2
) AS top
JOIN products AS product ON product.id = top.product_id
"""

# The rank is computed once per matching row, in the inner query; the outer one only renders JSON.
RANK_ALL_MATCHES = """
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

# A query's normalised form (tenk.search.spelling): the tsquery and its indexable part. One function call,
# no table read: far cheaper than any ranking, and what lets every spelling of a query share its page.
NORMALISE = "SELECT query::text, querytree(query) FROM websearch_to_tsquery('english', $1) AS query"
