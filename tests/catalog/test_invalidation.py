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
