"""Each baseline serves every route of the contract, with tenk's status codes, against the real services.

Baselines run as real uvicorn processes on free ports (the way the lab runs them), beside a real mock
upstream; their database connections carry an application_name so the test can see them in Postgres.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
import redis
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.clients import AUTH as TENK_AUTH
from harness.stack import VENV_BIN, Stack
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tenk.settings import Settings
from tenk.stack import free_port, wait_http_ok
from tests.support.waiting import eventually_blocking

BASELINES = ["naive_sync", "naive_blocking", "naive_async"]
RESP3_BASELINES = ["naive_blocking", "naive_async"]  # the ones with a RESP3 knob
AUTH = {"Authorization": "Bearer any-key-at-all"}


@dataclass
class Baseline:
    name: str
    url: str
    app_name: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def upstream_url(mock_process: MockUpstreamProcess) -> str:
    return mock_process.url


@pytest.fixture(scope="module")
def start_baseline(
    stack: Stack, upstream_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Baseline]]:
    """Start a baseline (once per name and knobs in this module) as `uvicorn module:app`, and wait for it."""
    started: dict[tuple[str, tuple[tuple[str, str], ...]], Baseline] = {}
    logs = tmp_path_factory.mktemp("baselines")

    def start(name: str, **knobs: str) -> Baseline:
        key = (name, tuple(sorted(knobs.items())))
        if key in started:
            return started[key]
        port = free_port()
        app_name = f"naive-test-{port}"
        log = logs / f"{name}-{port}.log"
        env = stack.env(TENK_UPSTREAM_URL=upstream_url, PGAPPNAME=app_name, **knobs)
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    str(VENV_BIN / "uvicorn"),
                    f"tenk.lab.targets.baselines.{name}:app",
                    "--port",
                    str(port),
                    "--no-access-log",
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        baseline = Baseline(name, f"http://127.0.0.1:{port}", app_name, process, log)
        started[key] = baseline
        try:
            # A start is about 3 s of imports on a quiet core; generous, for a machine with both cores busy.
            wait_http_ok(baseline.url + "/health", 120, process)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}\n{baseline.output()[-3000:]}") from None
        return baseline

    yield start
    for baseline in started.values():
        baseline.process.terminate()
    for baseline in started.values():
        try:
            baseline.process.wait(15)
        except subprocess.TimeoutExpired:
            baseline.process.kill()


@pytest.fixture(params=BASELINES)
def baseline(request: pytest.FixtureRequest, start_baseline: Callable[..., Baseline]) -> Baseline:
    return start_baseline(request.param)


@pytest.fixture
def http(baseline: Baseline) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=baseline.url, headers=AUTH, timeout=10) as client:
        yield client


def backends(stack: Stack, app_name: str) -> int:
    with psycopg.connect(stack.pg.url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app_name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_ping_and_health_answer(http: httpx.Client) -> None:
    assert http.get("/ping").json() == {"ping": "pong"}
    health = http.get("/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}


def test_product_by_id_is_the_row_tenk_serves(http: httpx.Client, stack: Stack) -> None:
    response = http.get("/products/7")
    assert response.status_code == 200
    body = response.json()
    with psycopg.connect(stack.pg.url) as conn:
        row = conn.execute("SELECT sku, name, price_cents, stock FROM products WHERE id = 7").fetchone()
    assert (body["sku"], body["name"], body["price_cents"], body["stock"]) == row
    assert set(body) == {"id", "sku", "name", "description", "price_cents", "stock", "updated_at"}


def test_missing_product_is_404_and_bad_id_is_422_naming_the_field(http: httpx.Client) -> None:
    missing = http.get("/products/999999999")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    bad = http.get("/products/0")
    assert bad.status_code == 422
    assert bad.json()["error"]["fields"][0]["field"] == "path.product_id"


def test_product_pages_walk_in_id_order(http: httpx.Client) -> None:
    first = http.get("/products", params={"limit": 3}).json()
    assert [item["id"] for item in first["items"]] == [1, 2, 3]
    second = http.get("/products", params={"limit": 3, "after": first["next"]}).json()
    assert [item["id"] for item in second["items"]] == [4, 5, 6]
    assert http.get("/products", params={"limit": 101}).status_code == 422
    assert http.get("/products", params={"after": "%%%"}).status_code == 422


def test_created_product_is_201_and_readable_and_a_repeated_sku_is_409(http: httpx.Client) -> None:
    sku = f"NAIVE-{uuid.uuid4().hex[:12]}"
    created = http.post("/products", json={"sku": sku, "name": "Naive kettle", "price_cents": 1299, "stock": 3})
    assert created.status_code == 201
    product_id = created.json()["id"]
    assert http.get(f"/products/{product_id}").json()["sku"] == sku
    again = http.post("/products", json={"sku": sku, "name": "Again", "price_cents": 1})
    assert again.status_code == 409
    assert http.post("/products", json={"name": "no sku", "price_cents": 1}).status_code == 422


def test_tasks_list_create_and_read(http: httpx.Client) -> None:
    page = http.get("/tasks", params={"limit": 5})
    assert page.status_code == 200
    assert len(page.json()["items"]) == 5
    assert page.json()["next"] is not None
    created = http.post("/tasks", json={"title": "measure the naive app"})
    assert created.status_code == 201
    task = created.json()
    assert task["done"] is False
    assert http.get(f"/tasks/{task['id']}").json() == task
    assert http.get("/tasks/999999999").status_code == 404
    assert http.post("/tasks", json={"title": ""}).status_code == 422


def test_search_ranks_the_same_hits_as_the_database(http: httpx.Client, stack: Stack) -> None:
    response = http.get("/search", params={"q": "lamp", "limit": 5})
    assert response.status_code == 200
    body = response.json()
    assert body["query"] == "lamp"
    with psycopg.connect(stack.pg.url) as conn:
        rows = conn.execute(
            "SELECT id FROM products, websearch_to_tsquery('english', 'lamp') AS q WHERE search @@ q "
            "ORDER BY ts_rank_cd(search, q) DESC, id LIMIT 5"
        ).fetchall()
    assert [hit["id"] for hit in body["items"]] == [row[0] for row in rows]
    assert rows
    assert http.get("/search", params={"q": "   "}).status_code == 422
    assert http.get("/search").status_code == 422


def test_posted_event_is_202_and_committed_before_the_answer(http: httpx.Client, stack: Stack) -> None:
    event_id = str(uuid.uuid4())
    event = {"event_id": event_id, "source": "sensor-9", "ts": "2026-01-02T03:04:05Z", "payload": {"t": 21.5}}
    response = http.post("/events", json=event)
    assert response.status_code == 202
    assert response.json() == {"accepted": 1, "ids": [event_id]}
    with psycopg.connect(stack.pg.url) as conn:
        row = conn.execute("SELECT source, payload FROM events WHERE event_id = %s", (event_id,)).fetchone()
    assert row == ("sensor-9", {"t": 21.5})
    assert http.post("/events", json={"source": "x"}).status_code == 422


def test_quote_comes_from_the_upstream(http: httpx.Client, upstream_url: str) -> None:
    response = http.get("/quotes/ACME")
    assert response.status_code == 200
    assert response.json()["symbol"] == "ACME"
    assert response.json()["price"] == httpx.get(f"{upstream_url}/v1/quotes/ACME").json()["price"]


def test_each_request_opens_and_closes_its_own_connection(baseline: Baseline, http: httpx.Client, stack: Stack) -> None:
    for _ in range(5):
        assert http.get("/tasks", params={"limit": 1}).status_code == 200
    # A closed connection's backend exits just after the client hangs up: poll, don't race it.
    eventually_blocking(
        lambda: backends(stack, baseline.app_name) == 0,
        10,
        "every backend of the closed connections to exit",
        every=0.05,
    )


def test_access_log_writes_a_line_per_request_unless_turned_off(
    baseline: Baseline, http: httpx.Client, start_baseline: Callable[..., Baseline]
) -> None:
    marker = f"/products/{4000 + BASELINES.index(baseline.name)}"
    http.get(marker)
    quiet = start_baseline(baseline.name, NAIVE_ACCESS_LOG="0")
    httpx.get(quiet.url + marker)
    assert f'"GET {marker} HTTP/1.1" 404' in baseline.output()
    assert marker not in quiet.output()


@pytest.mark.parametrize("name", BASELINES)
def test_study_metrics_knob_serves_metrics_labelled_by_raw_path_as_the_study_did(
    name: str, start_baseline: Callable[..., Baseline]
) -> None:
    studied = start_baseline(name, NAIVE_STUDY_METRICS="1")
    for product_id in (21, 22):
        assert httpx.get(f"{studied.url}/products/{product_id}").json()["id"] == product_id
    scraped = httpx.get(studied.url + "/metrics")
    assert scraped.status_code == 200
    assert 'request_latency_seconds_count{endpoint="/products/21",method="GET"} 1.0' in scraped.text
    assert 'endpoint="/products/22"' in scraped.text
    assert httpx.get(start_baseline(name).url + "/metrics").status_code == 404  # off unless asked


@pytest.mark.parametrize("name", BASELINES)
def test_pool_knob_keeps_connections_open_between_requests(
    name: str, start_baseline: Callable[..., Baseline], stack: Stack
) -> None:
    pooled = start_baseline(name, NAIVE_POOL="1")
    for _ in range(5):
        assert httpx.get(pooled.url + "/tasks/1").status_code == 200
    assert backends(stack, pooled.app_name) >= 1


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("mode", ["1", "shared"])
def test_redis_cache_knob_fills_and_then_serves_from_redis(
    name: str, mode: str, start_baseline: Callable[..., Baseline], stack: Stack
) -> None:
    cached = start_baseline(name, NAIVE_REDIS_CACHE=mode)
    product_id = 11 + BASELINES.index(name) * 2 + (mode == "shared")
    key = f"naive:product:{product_id}"
    client = redis.Redis.from_url(stack.redis.url)
    client.delete(key)
    first = httpx.get(f"{cached.url}/products/{product_id}").json()
    assert client.ttl(key) > 0
    # A value only Redis holds proves the second read came from the cache, not Postgres.
    client.set(key, httpx.Response(200, json={**first, "name": "from redis"}).content)
    assert httpx.get(f"{cached.url}/products/{product_id}").json()["name"] == "from redis"
    client.delete(key)
    client.close()


@pytest.mark.parametrize(("name", "overlaps"), [("naive_blocking", False), ("naive_sync", True), ("naive_async", True)])
def test_vendor_calls_overlap_unless_async_handlers_block_the_loop(
    name: str, overlaps: bool, start_baseline: Callable[..., Baseline], mock: MockUpstreamProcess
) -> None:
    # Six callers at once against a 200 ms vendor: the mock counts how many calls it held together.
    url = start_baseline(name).url
    mock.set_profile(p50_ms=200, p99_ms=300)
    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda _: httpx.get(f"{url}/quotes/ACME", timeout=60).status_code, range(6)))
    assert statuses == [200] * 6
    held_together = mock.stats()["max_in_flight"]
    assert held_together >= 2 if overlaps else held_together == 1


@pytest.mark.parametrize("name", ["naive_sync", "naive_blocking"])
def test_blocking_baselines_run_def_or_async_def_handlers_as_named(name: str) -> None:
    import asyncio
    import importlib

    from fastapi.routing import APIRoute

    app = importlib.import_module(f"tenk.lab.targets.baselines.{name}").app
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    assert {asyncio.iscoroutinefunction(route.endpoint) for route in routes} == {name == "naive_blocking"}


@pytest.fixture(scope="module")
def wsgi_url(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The WSGI baseline started the way the lab starts it: gunicorn, argv from the lab's own builder."""
    from tenk.lab.definition.ladder import RungConfig
    from tenk.lab.processes.servers import target_argv

    port = free_port()
    argv = target_argv(RungConfig(target="baseline:wsgi_sync", factory=False, server="gunicorn", workers=2), port, {})
    assert argv[argv.index("--worker-class") + 1] == "sync"
    log = tmp_path_factory.mktemp("wsgi") / "gunicorn.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=stack.env(NAIVE_POOL="1"), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http_ok(url + "/health", 30, process)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}\n{log.read_text(errors='replace')[-3000:]}") from None
        yield url
    finally:
        process.terminate()
        process.wait(15)


def test_wsgi_search_answers_as_the_fastapi_baselines_do(
    wsgi_url: str, start_baseline: Callable[..., Baseline]
) -> None:
    params: dict[str, str | int] = {"q": "lamp", "limit": 7}
    response = httpx.get(wsgi_url + "/search", params=params)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["items"]
    assert response.json() == httpx.get(start_baseline("naive_async").url + "/search", params=params).json()
    assert httpx.get(wsgi_url + "/ping").json() == {"ping": "pong"}


@pytest.mark.parametrize(
    ("params", "field"),
    [({}, "query.q"), ({"q": ""}, "query.q"), ({"q": "a\x00b"}, "query.q"), ({"q": "x" * 201}, "query.q"),
     ({"q": "lamp", "limit": "0"}, "query.limit"), ({"q": "lamp", "limit": "many"}, "query.limit"),
     ({"q": "   "}, "query.q")],
)  # fmt: skip
def test_wsgi_search_refuses_bad_input_with_422_naming_the_field(
    wsgi_url: str, params: dict[str, str], field: str
) -> None:
    response = httpx.get(wsgi_url + "/search", params=params)
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == field


def test_wsgi_unknown_route_is_404_and_other_methods_405_in_tenks_shape(wsgi_url: str) -> None:
    missing = httpx.get(wsgi_url + "/products/1")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    posted = httpx.post(wsgi_url + "/search", json={})
    assert (posted.status_code, posted.json()["error"]["code"]) == (405, "method_not_allowed")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.text(max_size=220), limit=st.one_of(st.none(), st.text(max_size=4), st.integers(-5, 80).map(str)))
def test_wsgi_search_never_answers_500(wsgi_url: str, q: str, limit: str | None) -> None:
    params = {"q": q} if limit is None else {"q": q, "limit": limit}
    assert httpx.get(wsgi_url + "/search", params=params).status_code in (200, 422)


def hello_calls(client: redis.Redis) -> int:
    """How many HELLO commands Redis has served: redis-py sends HELLO 3 on each RESP3 connection, none on RESP2."""
    stats = client.info("commandstats").get("cmdstat_hello", {"calls": 0})
    return int(stats["calls"])


@pytest.mark.parametrize("name", RESP3_BASELINES)
def test_resp3_knob_serves_the_cache_over_resp3(
    name: str, start_baseline: Callable[..., Baseline], stack: Stack
) -> None:
    client = redis.Redis.from_url(stack.redis.url)
    before = hello_calls(client)
    cached = start_baseline(name, NAIVE_REDIS_CACHE="shared", NAIVE_REDIS_PROTOCOL="3")
    product_id = 31 + BASELINES.index(name)
    client.delete(f"naive:product:{product_id}")
    assert httpx.get(f"{cached.url}/products/{product_id}").status_code == 200
    assert client.ttl(f"naive:product:{product_id}") > 0
    assert hello_calls(client) > before
    client.close()


async def test_the_product_route_without_depends_answers_like_tenks_declared_route(
    start_baseline: Callable[..., Baseline],
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    from tenk.lab.targets.baselines.product_without_depends import get_product_without_depends, without_depends

    settings = stack.settings(auth_reads=True)
    first = without_depends(settings).router.routes[0]
    assert isinstance(first, APIRoute)
    assert first.endpoint is get_product_without_depends
    baseline = start_baseline("product_without_depends", TENK_AUTH_READS="true")
    requests = [("/products/5", TENK_AUTH), ("/products/5", {}), ("/products/999999", TENK_AUTH)]
    answers = []
    async with httpx.AsyncClient(base_url=baseline.url, timeout=10) as variant:
        answers.append([((r := await variant.get(p, headers=h)).status_code, r.content) for p, h in requests])
    async with app_client_factory(settings) as tenk:
        answers.append([((r := await tenk.get(p, headers=h)).status_code, r.content) for p, h in requests])
    assert answers[0] == answers[1]
    assert [status for status, _ in answers[0]] == [200, 401, 404]
