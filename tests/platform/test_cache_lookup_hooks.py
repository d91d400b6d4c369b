"""The hook `tenk.platform.metrics` offers on cache-lookup counts: how tracing adds a span event per lookup
without patching the catalog's or the upstream's objects."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from prometheus_client import REGISTRY

from tenk.platform.metrics import CACHE_LOOKUPS, add_cache_lookup_hook, remove_cache_lookup_hook
from tenk.upstream import metrics as upstream_metrics
from tests.catalog import metrics as catalog_metrics

LOCAL_PRODUCT_HIT = {"cache": "product", "layer": "local", "result": "hit"}


def _local_product_hits() -> float:
    return REGISTRY.get_sample_value("tenk_cache_lookups_total", LOCAL_PRODUCT_HIT) or 0.0


async def test_a_hook_hears_each_cache_lookup_a_request_counts_with_its_labels(client: httpx.AsyncClient) -> None:
    heard: list[dict[str, str]] = []

    def hear(labels: Mapping[str, str]) -> None:
        heard.append(dict(labels))

    add_cache_lookup_hook(hear)
    try:
        assert (await client.get("/products/1231")).status_code == 200
        hits_before = heard.count(LOCAL_PRODUCT_HIT)
        counted_before = _local_product_hits()
        assert (await client.get("/products/1231")).status_code == 200  # now in the process's cache
    finally:
        remove_cache_lookup_hook(hear)
    assert heard.count(LOCAL_PRODUCT_HIT) == hits_before + 1, heard
    # The hook comes on top of the count, not instead of it.
    assert _local_product_hits() == counted_before + 1


def test_with_no_hook_a_count_is_one_add_to_the_prometheus_childs_value_and_nothing_more() -> None:
    def ignore(labels: Mapping[str, str]) -> None:
        pass

    add_cache_lookup_hook(ignore)
    remove_cache_lookup_hook(ignore)
    # The count is the plain increment of tenk.platform.metrics (no hook wrapped around it), and it adds one to
    # the Prometheus child's own value.
    for counter, labels in ((catalog_metrics.LOCAL_HIT, ("product",)), (upstream_metrics.CACHE_HIT, ("quote",))):
        assert counter.inc is counter._count
        value = CACHE_LOOKUPS.labels(*labels, "local", "hit")._value
        before = value.get()
        counter.inc()
        assert value.get() == before + 1
