"""What real apps are made of, followed from the route to the blocking call, with the chain as evidence:
module-level instances, `self.`/`cls.` calls, context-manager sessions, dependency factories, `app.state`,
dunder methods, base-class returns, wrapping decorators, third-party BaseHTTPMiddleware, connector options.

The `recall` fixture is one app (package `catalog`), analysed as a directory and as `catalog.main:app`;
`async_twins` is the same patterns on async clients, or handed to a thread, and must stay silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.doctor import Finding, Report, diagnose
from tests.doctor.expectations import FIXTURES, callee, expected, found

RECALL = FIXTURES / "recall"
MODES = ["directory", "module:app"]


def _recall(mode: str) -> Report:
    return diagnose(str(RECALL)) if mode == "directory" else diagnose("catalog.main:app", search_path=[str(RECALL)])


def _at(report: Report, file: str, code: str, rule: str = "blocking-call") -> Finding:
    matches = [f for f in report.findings if f.rule == rule and f.path.name == file and code in f.code]
    assert len(matches) == 1, (file, code, [f.code for f in report.findings if f.path.name == file])
    return matches[0]


def _chain(finding: Finding) -> list[tuple[str, str]]:
    """Each step as (function, the code at that step)."""
    return [(step.function, step.code) for step in finding.chain]


@pytest.fixture(scope="module", params=MODES)
def recall(request: pytest.FixtureRequest) -> Report:
    return _recall(request.param)


def test_directory_and_module_app_report_the_same_findings_with_the_same_chains() -> None:
    def shape(report: Report) -> list[tuple[str, str, int, list[tuple[str, str]]]]:
        return sorted((f.rule, f.path.name, f.line, _chain(f)) for f in report.findings)

    directory, module = (_recall(mode) for mode in MODES)
    assert shape(directory) == shape(module)
    assert found(module) == expected("recall")


def test_sync_orm_on_a_module_level_instance_is_found_through_its_inherited_method(recall: Report) -> None:
    query = _at(recall, "tables.py", "db.query(self.model)")
    assert "sqlalchemy.orm.Session().query" in query.message
    assert _chain(query) == [
        ("read_item", "async def read_item(item_id: int):"),
        ("read_item", "return Items.get_by_id(item_id)"),
    ]


def test_self_and_cls_calls_reach_classmethods_staticmethods_and_the_scoped_session(recall: Report) -> None:
    counted = _at(recall, "tables.py", "cls._session().query")
    assert [function for function, _ in _chain(counted)] == ["count_items", "count_items"]
    matching = _at(recall, "tables.py", "self.session.execute(query)")
    assert "sqlalchemy.orm.scoped_session().execute" in matching.message
    assert _chain(matching)[-1] == ("ItemTable.search", "return self._matching(text)")


def test_the_session_a_context_manager_yields_is_the_sync_session(recall: Report) -> None:
    # `@asynccontextmanager` helper, used with `async with`: the session it yields is still sync.
    report = _at(recall, "routes.py", "session.get(Item, report_id)")
    assert "sqlalchemy.orm.Session().get" in report.message
    # `db=Depends(session_dependency)`, unannotated: what the generator dependency yields.
    assert "sqlalchemy.orm.Session().query" in _at(recall, "routes.py", "db.query(Item).all()").message


def test_a_dependency_factory_and_a_callable_instance_are_dependencies(recall: Report) -> None:
    check = _at(recall, "auth.py", "ScopedSession.query(User)")
    assert "dependency `requires_role.check`" in check.message
    # The chain starts at the route that declares it.
    assert _chain(check)[:2] == [
        ("delete_item", "async def delete_item(item_id: int):"),
        ("delete_item", '@router.delete("/items/{item_id}", dependencies=[Depends(requires_role("admin"))])'),
    ]
    limit = _at(recall, "auth.py", "self.counter.incr")
    assert "dependency `RateLimit.__call__`" in limit.message


def test_app_state_set_in_the_lifespan_or_at_import_is_typed_where_it_is_read(recall: Report) -> None:
    assert "redis.Redis().get" in _at(recall, "routes.py", "request.app.state.cache.get").message
    mongo = _at(recall, "routes.py", "request.app.state.mongo.catalog.items.find_one")
    assert "pymongo.collection.Collection().find_one" in mongo.message
    assert "route `health`" in _at(recall, "main.py", "app.state.cache.ping").message
    # `request.state.db`, set by a middleware: the request's own state.
    assert "sqlalchemy.orm.Session().get" in _at(recall, "routes.py", "request.state.db.get").message
    search = _at(recall, "search.py", "self.http.get")
    assert _chain(search) == [
        ("search", "async def search(request: Request, q: str):"),
        ("search", "return request.app.state.search.query(q)"),
    ]


def test_item_access_membership_iteration_len_and_with_run_a_wrappers_dunder_methods(recall: Report) -> None:
    reached = {
        code: _chain(_at(recall, "wrappers.py", code))[-1]
        for code in ("hget", "hset", "hexists", "hkeys", "hlen", "self.client.ping")
    }
    assert reached == {
        "hget": ("read_session", 'return {"data": sessions[token]}'),
        "hset": ("write_session", "sessions[token] = data"),
        "hexists": ("read_session", "if token in sessions:"),
        "hkeys": ("list_sessions", "return [key for key in sessions]"),
        "hlen": ("count_sessions", 'return {"count": len(sessions)}'),
        "self.client.ping": ("check_sessions", "with sessions:"),
    }


def test_an_unannotated_constructor_parameter_is_typed_from_where_the_class_is_built(recall: Report) -> None:
    bump = _at(recall, "wrappers.py", "self.client.incr(self.key)")
    assert "redis.Redis().incr" in bump.message
    assert _chain(bump)[-1] == ("count_hit", 'return {"hits": hits.bump()}')


def test_reading_a_property_runs_its_getter(recall: Report) -> None:
    newest = _at(recall, "tables.py", "self.session.query(Item).order_by")
    assert _chain(newest)[-1] == ("newest_item", "return Items.newest")


def test_each_subclass_behind_a_base_class_return_is_reported_with_its_own_blocking_call(recall: Report) -> None:
    backends = {callee(f) for f in recall.findings if f.path.name == "storage.py"}
    assert backends == {
        "pathlib.Path().write_bytes",
        "shutil.copy",
        "botocore.client.BaseClient().put_object",
        "google.cloud.storage.Blob().upload_from_string",
        "azure.storage.blob.BlobClient().upload_blob",
        "minio.Minio().put_object",
    }
    for finding in (f for f in recall.findings if f.path.name == "storage.py"):
        *route, (method, code) = _chain(finding)
        assert route[-1] == ("upload", "get_storage().save(name, await request.body())")
        # The subclass whose method blocks, by its definition: the call names the base's.
        assert method.endswith(".save")
        assert not method.startswith("Storage.")
        assert code.startswith("def save(")


def test_a_wrapping_decorator_is_followed_through_its_wrapper_to_the_function(recall: Report) -> None:
    fetched = _at(recall, "outbound.py", "requests.get(settings.vendor_url")
    assert _chain(fetched) == [
        ("rates", "async def rates():"),
        ("rates", "return fetch_rates()"),
        ("retry.decorate.wrapper", "return fn(*args, **kwargs)"),
    ]
    # The wrapper's own sleep between attempts blocks too.
    assert _chain(_at(recall, "decorators.py", "time.sleep"))[-1] == ("rates", "return fetch_rates()")
    # `@retry(2)`: a decorator factory, applied where the function is defined.
    status = _at(recall, "outbound.py", "requests.head")
    assert _chain(status)[1:] == [
        ("vendor", 'return {"status": vendor_status()}'),
        ("retry.decorate.wrapper", "return fn(*args, **kwargs)"),
    ]
    rendered = _at(recall, "outbound.py", "subprocess.run")
    assert _chain(rendered)[-1] == ("timed.wrapper", "return fn(*args, **kwargs)")
    # A `def` route wrapped in an `async def` by its decorator runs on the loop.
    assert "route `export` (a `def` that its decorator's" in _at(recall, "routes.py", "read_text").message


def test_base_http_middleware_from_a_third_party_package_is_found_added_or_subclassed(recall: Report) -> None:
    added = _at(recall, "main.py", "app.add_middleware(SlowAPIMiddleware)", "base-http-middleware")
    assert "SlowAPIMiddleware" in added.message
    _at(recall, "main.py", "class RequestContext(ContextMiddleware)", "base-http-middleware")


def test_connector_options_from_a_dict_or_a_settings_default_are_read(recall: Report) -> None:
    # No route reaches either helper: one app-level note lists both.
    unbounded = {code for f in recall.findings if f.rule == "unbounded-pool" for code in _codes(f)}
    assert unbounded == {
        "connector = aiohttp.TCPConnector(**CONNECTOR_OPTIONS)  # expect: unbounded-pool:note",
        "return aiohttp.TCPConnector(limit=settings.pool_limit, ttl_dns_cache=300)  # expect: unbounded-pool:note",
    }
    assert _at(recall, "outbound.py", "**REQUEST_OPTIONS", "no-timeout")


def _codes(finding: Finding) -> list[str]:
    return [finding.code, *(step.code for step in finding.related)]


@pytest.mark.parametrize("mode", MODES)
def test_async_clients_awaited_calls_and_work_handed_to_threads_stay_silent(mode: str) -> None:
    twins = FIXTURES / "async_twins"
    report = diagnose(str(twins)) if mode == "directory" else diagnose("app:app", search_path=[str(twins)])
    assert report.entry_points >= 4
    assert report.findings == ()


def test_an_abstract_method_is_followed_into_at_most_fifty_implementations(tmp_path: Path) -> None:
    # Each entry point that calls it walks every implementation followed: a bound keeps that linear.
    classes = "".join(f"class Impl{i}(Base):\n    def run(self):\n        time.sleep({i})\n\n\n" for i in range(120))
    (tmp_path / "many.py").write_text(
        "import time\nfrom abc import ABC, abstractmethod\nfrom fastapi import FastAPI\n\napp = FastAPI()\n\n\n"
        "class Base(ABC):\n    @abstractmethod\n    def run(self): ...\n\n\n"
        f"{classes}"
        "def pick() -> Base:\n    return Impl0()\n\n\n"
        "@app.get('/')\nasync def route():\n    pick().run()\n"
    )
    report = diagnose(str(tmp_path))
    assert len([f for f in report.findings if f.rule == "blocking-call"]) == 50


def test_chains_of_bases_and_aliases_past_any_app_end_the_lookup_not_the_run(tmp_path: Path) -> None:
    # A hostile or generated file: each answer is computed inside at most a few others, not recursively.
    classes = "".join(f"class C{i}(C{i - 1}):\n    pass\n\n\n" for i in range(1, 3000))
    aliases = "".join(f"a{i} = a{i - 1}\n" for i in range(1, 3000))
    (tmp_path / "deep.py").write_text(
        "import time\nfrom fastapi import FastAPI\n\napp = FastAPI()\n\n\n"
        "class C0:\n    def wait(self):\n        time.sleep(1)\n\n\n"
        f"{classes}a0 = C0()\n{aliases}\n\n"
        "@app.get('/')\nasync def route():\n    C2999().wait()\n    a2999.wait()\n"
    )
    report = diagnose(str(tmp_path))
    assert report.entry_points == 1
