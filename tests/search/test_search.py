from __future__ import annotations

import httpx
import pytest

from harness.clients import AUTH


async def test_search_ranks_name_matches_above_description_matches(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/products",
        json={"sku": "SEARCH-ZEPHYR-1", "name": "Zephyrine Teapot", "price_cents": 100, "description": "a teapot"},
        headers=AUTH,
    )
    assert created.status_code == 201
    other = await client.post(
        "/products",
        json={
            "sku": "SEARCH-ZEPHYR-2",
            "name": "Plain Teapot",
            "price_cents": 100,
            "description": "inspired by zephyrine winds",
        },
        headers=AUTH,
    )
    assert other.status_code == 201
    hits = (await client.get("/search", params={"q": "zephyrine"})).json()["items"]
    assert [hit["sku"] for hit in hits] == ["SEARCH-ZEPHYR-1", "SEARCH-ZEPHYR-2"]
    assert hits[0]["rank"] > hits[1]["rank"]


async def test_search_finds_seeded_products_and_respects_limit(client: httpx.AsyncClient) -> None:
    body = (await client.get("/search", params={"q": "kettle", "limit": 5})).json()
    assert body["query"] == "kettle"
    assert 1 <= len(body["items"]) <= 5
    assert all("kettle" in hit["name"].lower() for hit in body["items"])


async def test_search_accepts_web_syntax(client: httpx.AsyncClient) -> None:
    response = await client.get("/search", params={"q": '"wireless kettle" -ceramic or lamp'})
    assert response.status_code == 200


async def test_stop_words_only_find_nothing(client: httpx.AsyncClient) -> None:
    response = await client.get("/search", params={"q": "the and of"})
    assert response.status_code == 200
    assert response.json()["items"] == []


@pytest.mark.parametrize("q", ["", "   ", "x" * 201, "nul\x00byte"])
async def test_empty_or_overlong_queries_are_422(client: httpx.AsyncClient, q: str) -> None:
    response = await client.get("/search", params={"q": q})
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "query.q"


async def test_missing_query_is_422(client: httpx.AsyncClient) -> None:
    response = await client.get("/search")
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "query.q"
