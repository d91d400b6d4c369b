"""bench-reads' "before" search app ranks every match, in both lanes, as search did before migration 0005."""

from __future__ import annotations

import asyncpg
import orjson
from benchmarks.full_ranking import FullRankingSearch, create_app

from harness.stack import Stack
from tenk.search.queries import RANK_ALL_MATCHES
from tests.support.inprocess import app_in_process


async def test_the_full_ranking_app_answers_search_with_the_full_ranking(stack: Stack) -> None:
    for hot_lane in (True, False):
        app = create_app(stack.settings(hot_lane=hot_lane, search={"cache": False}))
        async with app_in_process(app) as client:
            assert isinstance(app.state.search, FullRankingSearch)
            response = await client.get("/search", params={"q": "kettle lamp", "limit": 5})
        assert response.status_code == 200
        connection = await asyncpg.connect(stack.pg.url)
        try:
            full = orjson.loads(await connection.fetchval(RANK_ALL_MATCHES, "kettle lamp", 5))
        finally:
            await connection.close()
        assert response.json()["items"] == full
