from __future__ import annotations

import httpx


async def test_ping_answers_pong(client: httpx.AsyncClient) -> None:
    response = await client.get("/ping")
    assert response.status_code == 200
    assert response.json() == {"ping": "pong"}


async def test_seeded_product_is_served(client: httpx.AsyncClient) -> None:
    response = await client.get("/products/7")
    assert response.status_code == 200
    assert response.json()["sku"] == "SKU-00000007"
