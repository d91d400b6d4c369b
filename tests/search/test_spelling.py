"""Every spelling of a query shares one page, and a query that can match nothing worth ranking is not ranked."""

from __future__ import annotations

import orjson
import pytest

from harness.stack import Stack
from tenk.search import spelling
from tenk.search.service import SearchService
from tenk.search.settings import SearchSettings
from tests.search.test_cache import _counted_pool, _searches


@pytest.mark.parametrize(
    ("tsquery", "tree"),
    [
        ("'kettl' & !'kettl'", "'kettl'"),
        ("!'kettl'", "T"),
        ("'kettl' | !'lamp'", "T"),  # `kettle or -lamp`: nearly every product, by a scan of them all
        ("", ""),
        ("'kettl' <-> 'lamp' & !'kettl'", "'kettl' <-> 'lamp'"),
        ("'kettl' & !'lamp' & 'lamp'", "'kettl' & 'lamp'"),
    ],
)
def test_a_query_that_forbids_what_it_requires_or_requires_nothing_is_nothing(tsquery: str, tree: str) -> None:
    assert spelling.tsquery_key(tsquery, tree) == spelling.NOTHING


@pytest.mark.parametrize(
    ("tsquery", "tree"),
    [
        ("'kettl' | 'lamp' & !'kettl'", "'kettl' | 'lamp'"),  # & binds tighter: lamp without kettle matches
        ("'kettl' & !( 'kettl' <-> 'lamp' )", "'kettl'"),  # a kettle that is not a kettle lamp
        ("'lamp' & !!'kettl'", "'lamp'"),
        ("'kettl' & 'lamp' <-> 'kettl'", "'kettl' & 'lamp' <-> 'kettl'"),
        ("'kettl' & !'lamp'", "'kettl'"),
    ],
)
def test_a_satisfiable_query_keeps_its_tsquery_as_its_key(tsquery: str, tree: str) -> None:
    assert spelling.tsquery_key(tsquery, tree) == spelling.TSQUERY + tsquery


async def test_spellings_of_one_query_share_one_page_and_one_ranking(stack: Stack) -> None:
    statements: list[str] = []
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings())
        await service.search("kettle lamp", 10)  # first sighting: answered, not cached
        first = orjson.loads(await service.search("kettle lamp", 10))  # second: ranked and cached
        assert first["items"], "the seeded catalogue has kettle lamps"
        assert _searches(statements) == 2
        for other in ("kettle  lamp", "the kettle lamp", "Kettle LAMP", "kettles lamps", "kettle and the lamp"):
            body = orjson.loads(await service.search(other, 10))
            assert body == {"query": other, "items": first["items"]}, other
        assert _searches(statements) == 2
        normalised = service.normalisations
        for _ in range(3):
            await service.search("Kettle LAMP", 10)  # a spelling seen before costs no round trip
        assert service.normalisations == normalised
    finally:
        await pool.close()


async def test_a_query_without_a_positive_term_is_answered_without_ranking(stack: Stack) -> None:
    statements: list[str] = []
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings(cache=False))
        nothing = (
            "kettle -kettle",
            "-kettle",
            "the and of",
            '"kettle lamp" -kettle',
            "-kettle -lamp",
            "kettle or -lamp",
        )
        for query in nothing:
            assert orjson.loads(await service.search(query, 10))["items"] == [], query
        assert _searches(statements) == 0
        assert orjson.loads(await service.search("kettle -lamp", 10))["items"]
        assert _searches(statements) == 1
    finally:
        await pool.close()
