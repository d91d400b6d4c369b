"""Every rule finds its anti-pattern in a fixture and leaves the correct pattern alone."""

from __future__ import annotations

import pytest

from tenk.doctor import RULES
from tests.doctor.expectations import expected, fixture_names, found, rules, run


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_yields_exactly_its_marked_findings(name: str) -> None:
    report = run(name)
    assert found(report) == expected(name)


def test_every_rule_is_marked_somewhere_in_the_fixtures() -> None:
    marked = {rule for name in fixture_names() for rule, _, _ in expected(name)}
    assert marked == set(RULES)


def test_blocking_call_is_found_through_helpers_in_other_modules() -> None:
    report = run("helpers_chain")
    connect = next(f for f in report.findings if f.rule == "blocking-call" and "psycopg2.connect" in f.message)
    assert connect.path.name == "store.py"
    assert [step.path.name for step in connect.chain] == ["routes.py", "routes.py", "service.py"]
    assert connect.chain[0].function == "get_order"
    assert "route `get_order`" in connect.message


def test_depth_bounds_how_far_calls_are_followed() -> None:
    in_store = {f for f in run("helpers_chain", depth=1).findings if f.path.name == "store.py"}
    assert not {f for f in in_store if "fetch_order" in f.code or "psycopg2" in f.code}
    assert ("blocking-call", "store.py", 6) in found(run("helpers_chain", depth=2))


def test_sync_calls_handed_to_a_thread_do_not_block_the_loop_but_their_arguments_do() -> None:
    blocking = [f.code for f in run("offloaded").findings if f.rule == "blocking-call"]
    assert blocking == [
        'return await asyncio.to_thread(json.loads, open("settings.json").read())  # expect: blocking-call'
    ]


def test_published_optimized_redis_pool_per_request_through_depends_is_found() -> None:
    report = run("product_api_optimized")
    pool = next(f for f in report.findings if f.rule == "per-request-client")
    assert "ConnectionPool.from_url" in pool.code
    assert "dependency `get_redis_pool`" in pool.message


def test_clients_made_in_the_lifespan_cached_or_kept_globally_are_not_per_request() -> None:
    assert run("lifespan_pool").findings == ()


def test_both_spellings_of_base_http_middleware_are_found_and_pure_asgi_is_not() -> None:
    assert [f.rule for f in run("middleware_base").findings] == ["base-http-middleware"] * 2
    assert run("middleware_asgi").findings == ()


def test_labels_from_path_header_or_route_parameter_are_found_and_the_template_is_not() -> None:
    assert rules(run("labels_client")) == {"metric-label"}
    assert run("labels_template").findings == ()


def test_server_settings_are_read_from_code_dockerfile_compose_and_procfile() -> None:
    sources = {f.path.name for f in run("server_config").findings}
    assert sources == {"app.py", "Dockerfile", "compose.yaml", "Procfile"}
    assert run("server_tuned").findings == ()


def test_one_worker_is_flagged_only_where_the_deployment_gives_more_cores() -> None:
    workers = [f for f in run("server_config").findings if f.rule == "one-worker"]
    assert [(f.path.name, "4 cores" in f.message) for f in workers] == [("compose.yaml", True)]


def test_sync_route_names_the_thread_pool_limit_and_spares_pure_computation() -> None:
    report = run("sync_routes")
    assert all("40 threads" in f.message for f in report.findings if f.rule == "sync-route")
    assert not [f for f in report.findings if f.rule == "sync-route" and "total" in f.message]


def test_thread_hop_finds_def_code_that_cannot_wait_through_its_helpers_and_spares_what_may() -> None:
    hops = {f.message.split("`")[1] for f in run("sync_routes").findings if f.rule == "thread-hop"}
    # `fresh_settings` builds settings from the environment and stays in the thread; the route that uses
    # it is a hand-off of its own, and its body waits on nothing.
    assert hops == {"total", "app_settings", "fresh_region"}


def test_model_returned_under_a_response_model_is_flagged_but_a_dict_or_model_construct_is_not() -> None:
    lines = {f.code for f in run("validation").findings if f.rule == "double-validation"}
    assert lines == {
        "return Product(**ROWS[product_id])  # expect: double-validation",
        "return Product.model_validate(ROWS[product_id])  # expect: double-validation",
    }


def test_suppression_applies_only_with_a_reason() -> None:
    report = run("suppressed")
    assert report.suppressed == 1
    assert rules(report) == {"blocking-call", "suppression-reason"}
