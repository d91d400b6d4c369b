"""`python -m benchmarks.search_quality`: how close bounded search ranks to ranking every match; what it stores.

Not a timing benchmark. It seeds a real Postgres (embedded, on a free port, in a temporary directory;
or the one `--database-url` names, seeded only if empty), runs the shipped query set through the
service with its result cache off, and compares each answer with the full ranking (every GIN match
scored by ts_rank_cd), which is what search did before migration 0005:

- NDCG@10, the gain of a hit being its full-ranking score: 1.0 when the top ten are as good as the
  full ranking's top ten (ties in any order), less when better-ranked products were missed;
- the share of queries whose first hit is the same product;
- the share answered from the candidates alone (the rest fell back to the full ranking);
- the size of the GIN index and of the postings table and its index.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import shutil
import sys
import tempfile
from pathlib import Path

import asyncpg
import orjson

from tenk.search.queries import RANK_ALL_MATCHES
from tenk.search.service import SearchService
from tenk.search.settings import SearchSettings
from tenk.stack import EmbeddedPostgres, free_port
from tenk.stack.migrate import migrate
from tenk.stack.seed import search_queries, seed

SIZES = """
SELECT (SELECT count(*) FROM products) AS products,
       pg_size_pretty(pg_relation_size('products_search_idx')) AS gin,
       pg_size_pretty(pg_table_size('search_postings')) AS postings_table,
       pg_size_pretty(pg_indexes_size('search_postings')) AS postings_index,
       pg_size_pretty(pg_table_size('products')) AS products_table,
       (SELECT count(*) FROM search_postings) AS postings
"""


def ndcg(ours: list[dict[str, float]], reference: list[dict[str, float]]) -> float:
    ideal = sum(hit["rank"] / math.log2(i + 2) for i, hit in enumerate(reference))
    if ideal == 0:
        # Nothing matched, or only rank-0 matches (a query of -exclusions): right when the ids agree.
        return 1.0 if [h["id"] for h in ours] == [h["id"] for h in reference] else 0.0
    return sum(hit["rank"] / math.log2(i + 2) for i, hit in enumerate(ours)) / ideal


async def measure(dsn: str, queries: list[str], limit: int, candidates: int) -> dict[str, float]:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        settings = SearchSettings(cache=False, candidates=candidates, statement_timeout_ms=600_000)
        service = SearchService(pool, settings)
        scores: list[float] = []
        same_top = 0
        for query in queries:
            ours = orjson.loads(await service.search(query, limit))["items"]
            reference = orjson.loads(await pool.fetchval(RANK_ALL_MATCHES, query, limit))
            scores.append(ndcg(ours, reference))
            same_top += [hit["id"] for hit in ours[:1]] == [hit["id"] for hit in reference[:1]]
        sizes = dict(await pool.fetchrow(SIZES))
    finally:
        await pool.close()
    return {
        "queries": len(queries),
        "ndcg_at_10": sum(scores) / len(scores),
        "same_top_share": same_top / len(queries),
        "candidates_only_share": 1 - service.full_rankings / len(queries),
        "worst_ndcg": min(scores),
        **sizes,
    }


async def prepare(dsn: str, products: int) -> None:
    await migrate(dsn)
    await seed(dsn, products, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--products", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=10_000, help="the first N of the shipped query set")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=SearchSettings().candidates)
    parser.add_argument("--database-url", help="use this Postgres (seeded if its tables are empty)")
    parser.add_argument("--sizes-only", action="store_true", help="seed and report sizes, skip the comparison")
    args = parser.parse_args()

    root = None if args.database_url else Path(tempfile.mkdtemp(prefix="tenk-quality-", dir="/tmp"))
    postgres = None if root is None else EmbeddedPostgres(root / "postgres", free_port())
    try:
        if postgres is not None:
            postgres.start()
        dsn = args.database_url or (postgres.url if postgres else "")
        asyncio.run(prepare(dsn, args.products))
        queries = search_queries()[: args.queries] if not args.sizes_only else search_queries()[:1]
        figures = asyncio.run(measure(dsn, queries, args.limit, args.candidates))
        print(f"candidates per word {args.candidates}, limit {args.limit}", file=sys.stderr)
        for name, value in figures.items():
            print(f"{name:24} {value:.4f}" if isinstance(value, float) else f"{name:24} {value}")
    finally:
        if postgres is not None:
            postgres.stop()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
