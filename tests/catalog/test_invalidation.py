from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from tests.conftest import AUTH, ServerProcess, Stack

# A local TTL far longer than the test: seeing the new value can only come from the invalidation.
LONG_LOCAL_TTL = {"TENK_CATALOG_LOCAL_TTL_S": "300"}


def test_write_in_one_process_invalidates_the_local_cache_of_another(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    writer = spawn_api(stack, **LONG_LOCAL_TTL)
    reader = spawn_api(stack, **LONG_LOCAL_TTL)
    product_id = 321
    with httpx.Client(timeout=5) as http:
        original = http.get(f"{reader.base_url}/products/{product_id}").json()
        # Twice, so the second answer is certainly the reader's local copy.
        assert http.get(f"{reader.base_url}/products/{product_id}").json() == original

        new_stock = original["stock"] + 17
        written = http.patch(f"{writer.base_url}/products/{product_id}", json={"stock": new_stock}, headers=AUTH)
        assert written.status_code == 200
        committed_at = time.monotonic()

        stale_reads = 0
        while True:
            seen = http.get(f"{reader.base_url}/products/{product_id}").json()["stock"]
            if seen == new_stock:
                break
            stale_reads += 1
            assert time.monotonic() - committed_at < 1.0, "the reader kept serving the old value"
            time.sleep(0.005)
        # Once the reader has served the new value it must never go back to the old one.
        for _ in range(50):
            assert http.get(f"{reader.base_url}/products/{product_id}").json()["stock"] == new_stock


def test_a_deleted_product_is_404_from_every_process_never_the_cached_row(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    writer = spawn_api(stack, **LONG_LOCAL_TTL)
    reader = spawn_api(stack, **LONG_LOCAL_TTL)
    with httpx.Client(timeout=5) as http:
        product = {"sku": f"delete-me-{time.monotonic_ns()}", "name": "Doomed", "price_cents": 100}
        created = http.post(f"{writer.base_url}/products", json=product, headers=AUTH)
        assert created.status_code == 201
        location = created.headers["location"]
        assert location == f"/products/{created.json()['id']}"
        # Cached in both processes (and in Redis) before the delete.
        for server in (writer, reader, writer, reader):
            assert http.get(server.base_url + location).status_code == 200

        assert http.delete(writer.base_url + location).status_code == 401
        assert http.delete(writer.base_url + location, headers=AUTH).status_code == 204
        deleted_at = time.monotonic()
        assert http.get(writer.base_url + location).status_code == 404
        while http.get(reader.base_url + location).status_code != 404:
            assert time.monotonic() - deleted_at < 1.0, "the reader kept serving the deleted product"
            time.sleep(0.005)
        for _ in range(20):
            assert http.get(reader.base_url + location).status_code == 404
        assert http.delete(writer.base_url + location, headers=AUTH).status_code == 404
