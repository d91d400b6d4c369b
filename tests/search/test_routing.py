"""Which way a query is ranked: a match the planner estimates at no more than 6K rows (one pair's candidates)
is ranked in full, exactly; a larger one from its words' and pairs' candidates."""

from __future__ import annotations

import itertools

import asyncpg
import orjson

from harness.stack import Stack
from tenk.app import create_app
from tenk.search.queries import RANK_ALL_MATCHES, RANK_CANDIDATES
from tenk.stack.seed import VOCABULARY

CANDIDATES = 10
IN_FULL_UP_TO = 6 * CANDIDATES
COUNT = "SELECT count(*) FROM products WHERE search @@ websearch_to_tsquery('english', $1)"
ESTIMATE = "SELECT search_match_estimate(websearch_to_tsquery('english', $1))"


async def test_the_match_estimate_tells_a_large_match_from_a_small_one(stack: Stack) -> None:
    conn = await asyncpg.connect(stack.pg.url)
    try:
        for query in ("kettle", "kettle lamp", f"{VOCABULARY[40]} {VOCABULARY[60]}", "zzznothing kettle"):
            matches, estimate = await conn.fetchval(COUNT, query), await conn.fetchval(ESTIMATE, query)
            # The planner's figure from ANALYZE's sample: off by some, but on the same side of the threshold.
            assert (matches > 3 * IN_FULL_UP_TO) <= (estimate > IN_FULL_UP_TO), (query, matches, estimate)
            assert (matches < IN_FULL_UP_TO / 3) <= (estimate <= IN_FULL_UP_TO), (query, matches, estimate)
    finally:
        await conn.close()


async def test_a_query_estimated_to_match_at_most_k_products_is_ranked_in_full_and_exactly(stack: Stack) -> None:
    conn = await asyncpg.connect(stack.pg.url)
    try:
        small = 0
        for first, second in itertools.combinations(VOCABULARY[20:60:3], 2):
            query = f"{first} {second}"
            if await conn.fetchval(ESTIMATE, query) > IN_FULL_UP_TO:
                continue
            small += 1
            # A limit of 1, which a word's candidates would often fill: only the estimate sends it to the full ranking.
            ranked_all, items = await conn.fetchrow(RANK_CANDIDATES, query, 1, CANDIDATES)
            assert ranked_all, query
            assert orjson.loads(items) == orjson.loads(await conn.fetchval(RANK_ALL_MATCHES, query, 1))
        assert small >= 20
    finally:
        await conn.close()


async def test_the_search_pool_plans_each_statement_once_per_connection(stack: Stack) -> None:
    # Re-planning the ranking statement for each query's values cost a third of its Postgres CPU at 1M products.
    app = create_app(stack.settings())
    async with app.router.lifespan_context(app):
        assert await app.state.search.pg.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
