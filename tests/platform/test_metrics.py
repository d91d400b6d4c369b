from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram

from harness.stack import Stack
from tenk.platform.metrics import REQUEST_LATENCY, _unchecked_increment, _unchecked_observe
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually_blocking

# The last request's count lands within milliseconds of its answer; this bound only keeps a lost count
# from hanging the test.
COUNTED_WITHIN_S = 10.0


def _series(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


async def test_latency_is_labelled_by_route_template_never_the_raw_path(client: httpx.AsyncClient) -> None:
    for product_id in (11, 12, 13):
        await client.get(f"/products/{product_id}")
    await client.get("/tasks/5")
    await client.get("/definitely/not/a/route/987654")
    text = (await client.get("/metrics")).text
    routes = {
        m.group(1)
        for line in _series(text, "tenk_http_request_duration_seconds_count")
        if (m := re.search(r'route="([^"]*)"', line))
    }
    assert "/products/{product_id}" in routes
    assert "/tasks/{task_id}" in routes
    assert "<unmatched>" in routes
    assert not any(re.search(r"\d{2,}", route) for route in routes), routes


async def test_cache_layers_report_hits_and_misses(client: httpx.AsyncClient) -> None:
    await client.get("/products/1777")
    await client.get("/products/1777")
    text = (await client.get("/metrics")).text
    assert 'tenk_cache_lookups_total{cache="product",layer="local",result="hit"}' in text
    assert 'tenk_cache_lookups_total{cache="product",layer="local",result="miss"}' in text
    assert re.search(r'tenk_cache_lookups_total\{cache="product",layer="redis",result="(hit|miss)"\}', text)


async def test_pool_and_breaker_gauges_are_exported(client: httpx.AsyncClient) -> None:
    text = (await client.get("/metrics")).text
    assert re.search(r'tenk_pool_connections\{kind="size",pool="postgres"\} [1-9]', text)
    assert 'tenk_pool_connections{kind="in_use",pool="postgres"}' in text
    assert 'tenk_breaker_state{breaker="catalog-redis"} 0.0' in text


def test_with_several_workers_counters_add_up_across_processes(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    api = spawn_api(stack, server="uvicorn", workers=2)
    # Eight at a time, on fresh connections, so that both workers accept some (one at a time, the same
    # idle worker can win every accept, and a count of one worker's requests would pass unnoticed).
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: httpx.get(f"{api.base_url}/tasks/1", timeout=5).status_code, range(40)))
    assert statuses == [200] * 40
    with httpx.Client(base_url=api.base_url, timeout=5, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        # A request is counted once its response has been sent, so the last one's count can land just
        # after the client has its answer (seen on a busy machine: 39 of 40): wait for it, never past it.
        scraped: list[str] = []

        def all_counted() -> bool:
            scraped.append(http.get("/metrics").text)
            return _tasks_counted(scraped[-1]) >= 40

        eventually_blocking(
            all_counted, COUNTED_WITHIN_S, lambda: f"the 40 requests to be counted in\n{scraped[-1]}", every=0.05
        )
    assert _tasks_counted(scraped[-1]) == 40, scraped[-1]


def _tasks_counted(text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in _series(text, "tenk_http_request_duration_seconds_count")
        if 'route="/tasks/{task_id}"' in line
    )


def test_invented_methods_and_paths_add_no_metric_series(stack: Stack, spawn_api: Callable[..., ServerProcess]) -> None:
    # granian, like most servers, passes any method token through to the app.
    api = spawn_api(stack, server="granian")
    with httpx.Client(base_url=api.base_url, timeout=10) as http:

        def series() -> list[str]:
            return _series(http.get("/metrics").text, "tenk_http_request_duration_seconds_count")

        for i in range(20):  # every route template and status this test can produce, once
            http.request(f"INVENTED{i}", "/products/1")
            http.request(f"INVENTED{i}", f"/no/such/path/{i}")
            http.get(f"/no/such/path/{i}")
        series()  # and /metrics itself
        before = series()
        for i in range(20, 500):
            http.request(f"INVENTED{i}", "/products/1")
            http.request(f"INVENTED{i}", f"/no/such/path/{i}")
            http.get(f"/no/such/path/{i}")
        after = series()
    methods = {m.group(1) for line in after if (m := re.search(r'method="([^"]*)"', line))}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"}, methods
    assert len(after) == len(before), set(after) - set(before)


def _samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, sample.labels, sample.value)
        for family in registry.collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    ]


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=50))
def test_the_hot_paths_histogram_writes_what_the_librarys_observe_does(seconds: list[float]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    buckets = REQUEST_LATENCY._upper_bounds[:-1]  # the +Inf bucket is added again
    fast = _unchecked_observe(Histogram("latency", "", ["route"], buckets=buckets, registry=ours).labels("/a"))
    plain = Histogram("latency", "", ["route"], buckets=buckets, registry=theirs).labels("/a")
    # Exactly on each bound too: `le` includes it.
    for value in [*seconds, *buckets]:
        fast(value)
        plain.observe(value)
    assert _samples(ours) == _samples(theirs)


def test_the_hot_paths_counter_counts_what_the_librarys_inc_does() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = _unchecked_increment(Counter("lookups", "", ["layer"], registry=ours).labels("local"))
    plain = Counter("lookups", "", ["layer"], registry=theirs).labels("local")
    for _ in range(3):
        fast()
        plain.inc()
    assert _samples(ours) == _samples(theirs)
