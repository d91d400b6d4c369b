"""Every rule finds its anti-pattern in a fixture and leaves the correct pattern alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.doctor import RULES, diagnose
from tenk.doctor._rules import severity_of
from tests.doctor.expectations import FIXTURES, expected, fixture_names, found, rules, run


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_yields_exactly_its_marked_findings(name: str) -> None:
    report = run(name)
    assert found(report) == expected(name)


def test_every_rule_is_marked_somewhere_in_the_fixtures() -> None:
    marked = {rule for name in fixture_names() for rule, _, _, _ in expected(name)}
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
    assert ("blocking-call", "store.py", 6, "error") in found(run("helpers_chain", depth=2))


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
    findings = run("server_config").findings
    sources = {place.name for f in findings for place in (f.path, *(step.path for step in f.related))}
    assert sources == {"app.py", "Dockerfile", "compose.yaml", "Procfile"}
    assert run("server_tuned").findings == ()


def test_one_worker_is_flagged_only_where_the_deployment_gives_more_cores() -> None:
    workers = [f for f in run("server_config").findings if f.rule == "one-worker"]
    assert [(f.path.name, "4 cores" in f.message) for f in workers] == [("compose.yaml", True)]


def test_sync_routes_on_clients_with_an_async_api_are_one_note_for_the_app_listing_every_place() -> None:
    notes = [f for f in run("sync_routes").findings if f.rule == "sync-route"]
    assert len(notes) == 1
    note = notes[0]
    assert RULES[note.rule].severity == "note"
    assert note.line == 34
    assert [step.line for step in note.related] == [39, 44, 49, 50]
    assert note.message.startswith("4 sync routes and dependencies wait on clients in FastAPI's thread pool")
    assert "psycopg (3 calls), redis.Redis (1 call)" in note.message
    # The fix rewrites the call it was flagged at.
    assert note.fix == (
        '-    return {"value": cache.get(key)}  # expect: sync-route\n'
        '+    return {"value": await cache.get(key)}  # expect: sync-route  # in an async def, on redis.asyncio.Redis'
    )


def test_a_def_route_on_a_library_without_an_async_api_is_what_the_pool_is_for(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "import requests, sqlite3\nfrom fastapi import FastAPI\napp = FastAPI()\n"
        "@app.get('/rates')\ndef rates():\n    return requests.get('https://rates.example', timeout=2).json()\n"
        "@app.get('/rows')\ndef rows():\n    return sqlite3.connect('app.db').execute('select 1').fetchall()\n"
    )
    report = diagnose(str(tmp_path))
    assert "sync-route" not in rules(report)
    assert not [f for f in report.findings if "async API" in f.message]


def test_a_blocking_calls_fix_hands_that_very_call_to_a_thread() -> None:
    sleep = next(f for f in run("product_api_legacy").findings if "time.sleep" in f.message)
    assert sleep.fix is not None
    assert sleep.fix.splitlines()[1].startswith("+    await asyncio.to_thread(time.sleep, ")


def test_thread_hop_finds_def_code_that_cannot_wait_through_its_helpers_and_spares_what_may() -> None:
    hops = {f.message.split("`")[1] for f in run("sync_routes").findings if f.rule == "thread-hop"}
    # `fresh_settings` builds settings from the environment and stays in the thread; the route that uses
    # it is a hand-off of its own, and its body waits on nothing.
    assert hops == {"total", "app_settings", "fresh_region"}


def test_double_validation_fires_on_pydantic_one_for_the_model_and_its_subclasses_only() -> None:
    report = run("validation_v1")
    assert report.versions.packages["pydantic"].describe() == "pydantic 1.10.26 (requirements.txt)"
    lines = {f.code for f in report.findings if f.rule == "double-validation"}
    assert lines == {
        "return Product(**ROWS[product_id])  # expect: double-validation",
        "return Product.parse_obj(ROWS[product_id])  # expect: double-validation",
        'return Product(id=product_id, name="one")  # expect: double-validation',
        "return PricedProduct(**ROWS[product_id])  # expect: double-validation",
    }
    first = next(f for f in report.findings if f.line == 31)
    assert first.fix == (
        "-    return Product(**ROWS[product_id])  # expect: double-validation\n"
        "+    return ROWS[product_id]  # expect: double-validation"
    )


def test_double_validation_is_silent_on_pydantic_two(tmp_path: Path) -> None:
    app = (FIXTURES / "validation_v1" / "app.py").read_text()
    (tmp_path / "app.py").write_text(app)
    for requirements in ("pydantic==2.8.0\n", "pydantic>=2\n", "fastapi>=0.126\n"):
        (tmp_path / "requirements.txt").write_text(requirements)
        assert "double-validation" not in rules(diagnose(str(tmp_path))), requirements
    (tmp_path / "requirements.txt").write_text("fastapi==0.99.1\n")
    report = diagnose(str(tmp_path))
    assert report.versions.packages["pydantic"].assumed
    assert "double-validation" in rules(report)


def test_dump_only_model_needs_the_same_fields_and_its_fix_returns_what_it_was_built_from() -> None:
    report = run("validation")
    fixes = {f.line: (f.fix or "").splitlines()[-1] for f in report.findings if f.rule == "dump-only-model"}
    assert fixes == {
        50: "+    return product.model_dump()  # expect: dump-only-model",
        55: "+    body = product.model_dump_json()  # expect: dump-only-model",
        61: '+    return {"id": 1, "name": "one"}  # expect: dump-only-model',
    }
    # A projection (`Public(**user.model_dump())`, a literal with a key the model drops) is not a finding:
    # returning the source would send the fields the model leaves out.
    assert not [f for f in report.findings if "Public" in f.code or "secret" in f.code]


def test_an_asyncio_redis_pool_is_unbounded_only_before_redis_py_eight(tmp_path: Path) -> None:
    unbounded = [f for f in run("clients_limits").findings if f.rule == "unbounded-pool" and "aioredis" in f.code]
    assert [f.case for f in unbounded] == ["redis.asyncio"]
    (tmp_path / "app.py").write_text((FIXTURES / "clients_limits" / "app.py").read_text())
    (tmp_path / "requirements.txt").write_text("redis==8.1.0\n")
    assert not [f for f in diagnose(str(tmp_path)).findings if "aioredis" in f.code]


def test_suppression_applies_only_with_a_reason() -> None:
    report = run("suppressed")
    assert report.suppressed == 1
    assert rules(report) == {"blocking-call", "suppression-reason"}


def test_a_per_request_clients_fix_rewrites_the_call_it_flagged_not_another_librarys() -> None:
    findings = run("unserved").findings
    made = next(f for f in findings if f.rule == "per-request-client")
    assert made.fix == (
        "-    async with aiohttp.ClientSession() as session:  # expect: no-timeout, per-request-client\n"
        "+    session = request.app.state.client  # in the lifespan, once: app.state.client = aiohttp.ClientSession()"
    )
    legacy = next(f for f in run("product_api_legacy").findings if f.rule == "per-request-client")
    assert legacy.fix is not None
    assert legacy.fix.startswith(f"-    {legacy.code.strip()}\n+    ")
    assert "request.app.state.client" in legacy.fix


def test_the_same_call_is_a_warning_on_a_route_and_a_note_in_an_sdk_a_cli_or_the_lifespan() -> None:
    graded = {(f.path.name, f.line): severity_of(f) for f in run("unserved").findings if f.rule == "no-timeout"}
    assert graded == {("app.py", 17): "note", ("app.py", 26): "warning", ("app.py", 33): "warning"}


def test_a_client_made_per_request_on_an_admin_route_is_a_note() -> None:
    made = [f for f in run("unserved").findings if f.rule == "per-request-client"]
    assert [(f.line, severity_of(f)) for f in made] == [(26, "warning"), (42, "note")]
    note = made[1]
    assert "an admin route (`Depends(get_admin_user)`)" in note.message
    assert [step.line for step in note.related] == [48]
