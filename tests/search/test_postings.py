"""The score-ordered postings (migration 0005) stay equal to what the products' text implies, on every write path,
and ranking the candidates they give answers like ranking every match whenever the answer is short."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import asyncpg
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.stack import Stack, fresh_database
from tenk.search import spelling
from tenk.search.queries import NORMALISE, ONE_WORD, RANK_ALL_MATCHES, RANK_CANDIDATES, RANK_ONE_WORD, candidates_for
from tenk.search.service import SearchService
from tenk.search.settings import SearchSettings
from tenk.stack.migrate import bundled_migrations, migrate
from tenk.stack.seed import VOCABULARY, products, seed

CANDIDATES = 10
STALE_POSTINGS = """
SELECT count(*) FROM (
    (SELECT lexeme, score, product_id FROM search_postings
     EXCEPT ALL
     SELECT scored.lexeme, scored.score, products.id FROM products, search_postings_of(products.search) AS scored)
    UNION ALL
    (SELECT scored.lexeme, scored.score, products.id FROM products, search_postings_of(products.search) AS scored
     EXCEPT ALL
     SELECT lexeme, score, product_id FROM search_postings)
) AS difference
"""


async def test_migration_0005_posts_the_products_of_an_existing_database(stack: Stack) -> None:
    dsn = await fresh_database(stack, "tenk_before_0005")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in bundled_migrations():
            if migration.version < 5:
                await conn.execute(migration.sql)
                await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2)", migration.version, migration.name)
        await conn.copy_records_to_table(
            "products", records=products(300), columns=["id", "sku", "name", "description", "price_cents", "stock"]
        )
        assert "0005_search_postings.sql" in await migrate(dsn)
        assert await conn.fetchval("SELECT count(DISTINCT product_id) FROM search_postings") == 300
        assert await conn.fetchval(STALE_POSTINGS) == 0
    finally:
        await conn.close()


async def test_every_write_path_keeps_the_postings_in_step(stack: Stack) -> None:
    dsn = await fresh_database(stack, "tenk_postings_writes")
    await migrate(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.copy_records_to_table(
            "products", records=products(200), columns=["id", "sku", "name", "description", "price_cents", "stock"]
        )
        await conn.execute("SELECT setval(pg_get_serial_sequence('products', 'id'), 200)")
        assert await conn.fetchval(STALE_POSTINGS) == 0
        await conn.execute(
            "INSERT INTO products (sku, name, description, price_cents) VALUES "
            "('P-1', 'Zephyrine Kettle', 'a kettle, a kettle', 1), ('P-2', 'Plain Lamp', '', 2)"
        )
        await conn.execute("UPDATE products SET name = 'Zephyrine Lamp Kettle' WHERE sku = 'P-1'")
        await conn.execute("UPDATE products SET price_cents = price_cents + 1")  # text unchanged: nothing re-posted
        await conn.execute(
            "INSERT INTO products (sku, name, price_cents) VALUES ('P-2', 'Changed Lamp', 3), ('P-3', 'New', 4) "
            "ON CONFLICT (sku) DO UPDATE SET name = excluded.name"
        )
        await conn.execute("DELETE FROM products WHERE id % 7 = 0")
        assert await conn.fetchval(STALE_POSTINGS) == 0
        assert await conn.fetchval("SELECT count(*) FROM search_postings WHERE lexeme = 'zephyrin'") == 1
        await conn.execute("TRUNCATE products")
        assert await conn.fetchval("SELECT count(*) FROM search_postings") == 0
    finally:
        await conn.close()


async def test_seeding_an_empty_catalogue_posts_every_product_and_leaves_indexes_and_trigger_in_place(
    stack: Stack,
) -> None:
    dsn = await fresh_database(stack, "tenk_seeded_postings")
    await migrate(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        indexes = (
            "SELECT count(*) FROM pg_indexes WHERE indexname IN ('products_search_idx', 'search_postings_rank_idx')"
        )
        assert await conn.fetchval(indexes) == 2
        assert (await seed(dsn, 300, 0))["products"] == 300
        assert await conn.fetchval(STALE_POSTINGS) == 0
        assert await conn.fetchval("SELECT count(DISTINCT product_id) FROM search_postings") == 300
        assert await conn.fetchval(indexes) == 2
        await conn.execute("INSERT INTO products (sku, name, price_cents) VALUES ('P-AFTER', 'Quillotine Lamp', 1)")
        assert await conn.fetchval("SELECT count(*) FROM search_postings WHERE lexeme = 'quillotin'") == 1
    finally:
        await conn.close()


async def test_a_posting_scores_a_product_as_ranking_that_one_word_does(stack: Stack) -> None:
    conn = await asyncpg.connect(stack.pg.url)
    try:
        differing = await conn.fetchval(
            "SELECT count(*) FROM search_postings JOIN products ON products.id = product_id "
            "WHERE strpos(lexeme, ' ') = 0 AND abs(score - ts_rank_cd(search, quote_literal(lexeme)::tsquery)) > 1e-4"
        )
        assert differing == 0
    finally:
        await conn.close()


_words = st.sampled_from([*VOCABULARY[:300], "zzznothing", "the", "and"])
_queries = st.one_of(
    st.lists(_words, min_size=1, max_size=3).map(" ".join),
    st.lists(_words, min_size=2, max_size=3).map(lambda w: '"' + " ".join(w) + '"'),
    st.lists(_words, min_size=2, max_size=3).map(" or ".join),
    st.tuples(_words, _words).map(lambda w: f"{w[0]} -{w[1]}"),
    st.text(min_size=1, max_size=30),
)


@pytest.fixture
async def service_and_pool(stack: Stack) -> object:
    pool = await asyncpg.create_pool(stack.pg.url, min_size=1, max_size=2)
    # Few candidates per word, so that the small test catalogue exercises the bounded path and its fallback.
    yield SearchService(pool, SearchSettings(cache=False, candidates=CANDIDATES)), pool
    await pool.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=_queries, limit=st.integers(1, 50))
@example(query="-0", limit=1)  # exclusions only: found by the text strategy on a busy machine
async def test_candidate_ranking_returns_as_many_hits_as_full_ranking_and_the_same_when_short(
    service_and_pool: tuple[SearchService, asyncpg.Pool], query: str, limit: int
) -> None:
    service, pool = service_and_pool
    query = query.replace("\x00", "")
    ours = orjson.loads(await service.search(query, limit))["items"]
    if spelling.tsquery_key(*await pool.fetchrow(NORMALISE, query)) == spelling.NOTHING:
        # By design (tenk.search.spelling): a query the index cannot narrow is answered with no hits.
        assert ours == []
        return
    full = orjson.loads(await pool.fetchval(RANK_ALL_MATCHES, query, limit))
    assert len(ours) == len(full)
    assert [hit["rank"] for hit in ours] == sorted((hit["rank"] for hit in ours), reverse=True)
    if len(full) < limit:
        assert ours == full


_one_words = st.tuples(
    st.sampled_from([*VOCABULARY[:300], *VOCABULARY[-50:], "zzznothing", "the", "and", "or", "not"]),
    st.sampled_from(["", " ", "  "]),
    st.booleans(),
).map(lambda drawn: f"{drawn[1]}{drawn[0].upper() if drawn[2] else drawn[0]}{drawn[1]}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(word=_one_words, limit=st.integers(1, 50))
async def test_a_one_word_query_gets_exactly_the_full_ranking_through_the_one_word_statement(
    service_and_pool: tuple[SearchService, asyncpg.Pool], word: str, limit: int
) -> None:
    service, pool = service_and_pool
    assert ONE_WORD.fullmatch(word)
    ours = orjson.loads(await pool.fetchval(RANK_ONE_WORD, word, limit))
    assert ours == orjson.loads(await pool.fetchval(RANK_ALL_MATCHES, word, limit))
    assert orjson.loads(await service.search(word, limit))["items"] == ours


def test_a_page_over_ten_results_reads_candidates_in_proportion_and_a_smaller_one_the_setting() -> None:
    # A page of 50 reading a page of ten's candidates fell back to ranking every match for most queries.
    assert [candidates_for(limit, 20) for limit in (1, 10, 11, 20, 50)] == [20, 20, 22, 40, 100]


def _plan_nodes(node: dict[str, object]) -> Iterator[dict[str, object]]:
    yield node
    for child in cast(list[dict[str, object]], node.get("Plans", [])):
        yield from _plan_nodes(child)


async def test_a_long_query_reads_candidates_for_its_words_and_none_for_their_pairs(stack: Stack) -> None:
    # Pairs grow with the square of the words: an `or` of 20 words read 190 pairs' candidates.
    words = VOCABULARY[:12]
    conn = await asyncpg.connect(stack.pg.url)
    try:
        explained = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + RANK_CANDIDATES, " or ".join(words), 10, CANDIDATES
        )
    finally:
        await conn.close()
    nodes = _plan_nodes(orjson.loads(explained)[0]["Plan"])
    postings = next(node for node in nodes if node.get("Subplan Name") == "CTE postings")
    assert cast(float, postings["Actual Rows"]) <= len(words) * CANDIDATES
