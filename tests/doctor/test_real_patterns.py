"""The shapes real apps are built from, each reached from an `async def` route with its full chain:
a module-level repository, classmethods through `cls.`, a `@contextmanager` session, a dependency
factory, clients on `app.state`, a dict-like wrapper, a base-class return, a function passed as an
argument, an attribute given a client only when configured, `Path(...) / name`, tempfile, routes
registered from a list or in a loop, a dependency parameter with no annotation, and a base type whose
method dispatches by name to what its subclasses implement.

The `real_patterns` fixture is one package (`shop`, with folders that have no `__init__.py`), analysed
as a directory and as `shop.main:app`. Its `api/offloaded.py` makes the same calls handed to a thread or
in `def` routes: none of them is a blocking-call error."""

from __future__ import annotations

import pytest

from tenk.doctor import Finding, Report, diagnose
from tests.doctor.expectations import FIXTURES, callee, expected, found

APP = FIXTURES / "real_patterns"
MODES = ["directory", "module:app"]


def _diagnose(mode: str) -> Report:
    return diagnose(str(APP)) if mode == "directory" else diagnose("shop.main:app", search_path=[str(APP)])


@pytest.fixture(scope="module", params=MODES)
def report(request: pytest.FixtureRequest) -> Report:
    return _diagnose(request.param)


def _blocking(report: Report, file: str, code: str) -> Finding:
    matches = [f for f in report.findings if f.rule == "blocking-call" and f.path.name == file and code in f.code]
    assert len(matches) == 1, (file, code, [f.code for f in report.findings if f.path.name == file])
    return matches[0]


def _chain(finding: Finding) -> list[tuple[str, str]]:
    return [(step.function, step.code) for step in finding.chain]


def test_both_modes_report_exactly_the_marked_findings_with_the_same_chains() -> None:
    def shape(report: Report) -> list[tuple[str, str, int, list[tuple[str, str]]]]:
        return sorted((f.rule, f.path.name, f.line, _chain(f)) for f in report.findings)

    directory, module = (_diagnose(mode) for mode in MODES)
    assert shape(directory) == shape(module)
    assert found(module) == expected("real_patterns")


def test_a_method_of_a_module_level_instance_is_followed_to_its_sync_query(report: Report) -> None:
    query = _blocking(report, "orders.py", "self.session.get(self.model, key)")
    assert callee(query) == "sqlalchemy.orm.Session().get"
    assert _chain(query) == [
        ("read_order", "async def read_order(key: int):"),
        ("read_order", "return Orders.by_id(key)"),
    ]


def test_the_session_a_contextmanager_yields_is_the_sync_session_and_its_commit_blocks(report: Report) -> None:
    count = _blocking(report, "orders.py", "session.query(cls.model).count()")
    assert callee(count) == "sqlalchemy.orm.Session().query"
    assert _chain(count) == [
        ("count_orders", "async def count_orders():"),
        ("count_orders", 'return {"count": OrderRepository.count()}'),
    ]
    commit = _blocking(report, "db.py", "session.commit()")
    assert _chain(commit)[-1] == ("Repository.count", "with session_scope() as session:")


def test_a_cls_call_and_a_function_passed_as_an_argument_are_followed_into_the_query(report: Report) -> None:
    pending = _blocking(report, "orders.py", 'filter(Order.status != "shipped")')
    assert _chain(pending) == [
        ("pending_orders", "async def pending_orders():"),
        ("pending_orders", "return OrderRepository.pending()"),
        ("OrderRepository.pending", "return cls.run(cls.unfinished)"),
        ("Repository.run", "return query(session)"),
    ]
    shipped = _blocking(report, "orders.py", 'filter_by(status="shipped")')
    assert _chain(shipped) == [
        ("shipped_orders", "async def shipped_orders():"),
        ("shipped_orders", "return in_session(OrderRepository.shipped)"),
        ("in_session", "return query(session)"),
    ]


def test_the_closure_a_dependency_factory_returns_is_the_dependency(report: Report) -> None:
    check = _blocking(report, "security.py", "session.query(Account)")
    assert "dependency `requires_role.check`" in check.message
    assert _chain(check) == [
        ("delete_order", "async def delete_order(key: int):"),
        ("delete_order", '@router.delete("/orders/{key}", dependencies=[Depends(requires_role("admin"))])'),
        ("requires_role.check", "async def check(authorization: str = Header()) -> Account:"),
    ]


def test_clients_the_lifespan_puts_on_app_state_are_typed_where_routes_read_them(report: Report) -> None:
    assert callee(_blocking(report, "main.py", "request.app.state.redis.ping()")) == "redis.Redis().ping"
    latest = _blocking(report, "rates.py", 'self.http.get("/latest")')
    assert callee(latest) == "httpx.Client().get"
    assert _chain(latest) == [
        ("rates", "async def rates(request: Request):"),
        ("rates", "return request.app.state.rates.latest()"),
    ]


def test_item_access_on_a_dict_like_wrapper_runs_its_sync_redis_dunders(report: Report) -> None:
    get = _blocking(report, "cache.py", "self.client.get(key)")
    assert _chain(get)[-1] == ("read_cart", 'return {"cart": carts[token]}')
    assert _chain(_blocking(report, "cache.py", "self.client.set"))[-1] == (
        "write_cart",
        "carts[token] = await request.body()",
    )


def test_each_exporter_behind_a_base_class_return_is_reported_with_its_own_chain(report: Report) -> None:
    exports = [f for f in report.findings if f.path.name == "exports.py" and f.chain[0].function == "export"]
    assert {callee(f) for f in exports} == {
        "zipfile.ZipFile",
        "zipfile.ZipFile().writestr",
        "tempfile.mkstemp",
        "os.fdopen",
        "tarfile.open",
        "tarfile.TarFile().add",
        # `self.client = client`, then `boto3.client("s3")` when none was given.
        "botocore.client.BaseClient().put_object",
        # Inherited from a mixin named before the base class.
        "shutil.move",
    }
    subclasses = {"ZipExporter.export", "TarExporter.export", "S3Exporter.export", "LocalFilesMixin.export"}
    for finding in exports:
        # The chain ends in the subclass's method, named by its definition: the call names the base's.
        *route, (method, code) = _chain(finding)
        assert route == [
            ("export", "async def export(kind: str, request: Request):"),
            ("export", 'return {"name": get_exporter(kind).export("orders", await request.body())}'),
        ]
        assert method in subclasses
        assert code.startswith("def export(")


def test_an_attribute_that_holds_a_sync_client_only_when_configured_is_that_client(report: Report) -> None:
    send = _blocking(report, "mail.py", "self.transport.send_message(message)")
    assert callee(send) == "smtplib.SMTP().send_message"
    assert _chain(send)[-1] == ("send_receipt", 'mailer.send(f"order {key} received")')


def test_a_path_joined_with_slash_and_a_temporary_file_are_file_io(report: Report) -> None:
    page = _blocking(report, "exports.py", ".read_text()")
    assert callee(page) == "pathlib.Path().read_text"
    assert _chain(page) == [("page", "async def page(name: str):"), ("page", "return render(name)")]
    spooled = _blocking(report, "exports.py", "tempfile.NamedTemporaryFile")
    assert _chain(spooled)[-1] == ("spool_body", 'return {"path": spool(await request.body())}')


def test_raw_psycopg2_through_a_cursor_helper_and_a_loop_run_to_completion_are_found(report: Report) -> None:
    reports = {callee(f): _chain(f)[-1] for f in report.findings if f.path.name == "reports.py"}
    assert reports == {
        "psycopg2.pool.AbstractConnectionPool().getconn": ("daily_totals", "with cursor() as cur:"),
        "psycopg2.connection().commit": ("daily_totals", "with cursor() as cur:"),
        "psycopg2.cursor().execute": ("daily_report", "return daily_totals()"),
        "psycopg2.cursor().fetchall": ("daily_report", "return daily_totals()"),
        "asyncio.AbstractEventLoop().run_until_complete": ("daily_report", "warm_up()"),
    }


def test_routes_registered_from_a_list_or_in_a_loop_are_routes(report: Report) -> None:
    for code, route in [
        ('app.state.redis.incr("pings")', "ping"),
        ("request.app.state.redis.flushdb()", "flush"),
        ('request.app.state.redis.get("visits")', "visits"),
        ('request.app.state.redis.delete("visits")', "reset"),
    ]:
        assert f"route `{route}`" in _blocking(report, "main.py", code).message


def test_an_unannotated_dependency_parameter_is_what_its_dependency_returns_or_yields(report: Report) -> None:
    # `ledger=Depends(get_ledger)`: `get_ledger` returns a module-level `Optional[Ledger]` that a
    # `global` assignment fills in; `ledger_scope` yields a new one; `Annotated[Any, Depends(...)]`.
    for code, route, call in [
        ("select sum(amount) from entries", "balance", 'return {"balance": ledger.balance(account)}'),
        ("select * from entries", "entries", "return ledger.entries(account)"),
        ("update accounts set closed = true", "close_account", "ledger.close(account)"),
    ]:
        query = _blocking(report, "ledger.py", code)
        assert callee(query) == "sqlalchemy.orm.Session().execute"
        assert _chain(query)[0][0] == route
        assert _chain(query)[-1] == (route, call)


def test_a_method_dispatched_by_name_on_a_base_type_runs_each_subclass_implementation(report: Report) -> None:
    # `runtime: Runtime`, whose `run_action` calls `getattr(self, action.kind)(action)`: one subclass
    # overrides `run_action` itself, another implements the abstract `read` it dispatches to.
    post = _blocking(report, "runtimes.py", "requests.post(")
    assert _chain(post) == [
        ("sandbox_file", "async def sandbox_file(path: str):"),
        ("sandbox_file", 'return {"content": runtime.run_action(Action("read", path))}'),
        ("RemoteRuntime.run_action", "return self._send(action)"),
    ]
    read = _blocking(report, "runtimes.py", "with open(path) as handle:")
    assert _chain(read) == [
        ("sandbox_file", "async def sandbox_file(path: str):"),
        ("sandbox_file", 'return {"content": runtime.run_action(Action("read", path))}'),
        ("Runtime.run_action", "return getattr(self, action.kind)(action)"),
        ("LocalRuntime.read", "return self._slurp(action.path)"),
    ]


def test_a_dispatch_by_name_runs_only_the_abstract_methods_that_take_its_arguments(report: Report) -> None:
    # `getattr(self, action.kind)(action)` passes one argument: `close(self)` takes none.
    assert not [f for f in report.findings if f.path.name == "runtimes.py" and "requests.delete" in f.code]


def test_a_concrete_base_method_is_not_followed_into_a_subclass_override(report: Report) -> None:
    # `runtime.describe()` on the base type runs `Runtime.describe`, which does no I/O.
    assert not [f for f in report.findings if f.path.name == "runtimes.py" and "sandbox.example/about" in f.code]


def test_the_same_calls_handed_to_a_thread_or_in_a_def_route_are_no_blocking_call(report: Report) -> None:
    from_offloaded = [f for f in report.findings if f.chain and f.chain[0].path.name == "offloaded.py"]
    assert [f.rule for f in from_offloaded] == ["sync-route"]
    # The `def` routes' sync clients are the app-wide note, not an error.
    assert "pending_orders_in_a_thread" in from_offloaded[0].chain[0].code


def test_the_package_folder_named_as_the_directory_reaches_its_folders_without_init_files() -> None:
    # `shop/repositories/` has no `__init__.py`: inside the package `shop` it is `shop.repositories`.
    package = diagnose(str(APP / "shop"))
    assert package.unread == ()
    assert found(package) == expected("real_patterns")


def test_an_app_assigned_in_both_branches_of_a_module_level_if_is_the_module_app() -> None:
    # `if DEBUG: app = FastAPI(debug=True) else: app = FastAPI(docs_url=None)`: the entry point exists.
    report = diagnose("shop.main:app", search_path=[str(APP)])
    assert "route `health`" in _blocking(report, "main.py", "request.app.state.redis.ping()").message


def test_a_backend_module_picked_by_a_setting_string_is_followed_from_its_interface(report: Report) -> None:
    # Nothing imports `shop.storage.disk`; module mode knows its class as a subclass of `Storage` because
    # it loads the other modules of the folders it imports.
    write = _blocking(report, "disk.py", 'with open(ROOT / key, "wb") as blob:')
    assert callee(write) == "builtins.open"
    assert _chain(write) == [
        ("put_blob", "async def put_blob(key: str, body: bytes):"),
        ("put_blob", "await get_storage().save(key, body)"),
        ("Backend.save", "async def save(self, key: str, data: bytes) -> None:"),
    ]
    assert write.chain[-1].path.name == "disk.py"


def test_a_router_named_only_by_a_string_in_a_feature_table_is_examined(report: Report) -> None:
    purge = _blocking(report, "admin.py", 'shutil.rmtree("/var/lib/shop/exports")')
    assert "route `purge_exports`" in purge.message
    assert _chain(purge) == [("purge_exports", "async def purge_exports():")]


def test_an_aiohttp_session_whose_every_request_passes_a_timeout_is_no_no_timeout(report: Report) -> None:
    timeouts = [f for f in report.findings if f.rule == "no-timeout" and f.path.name == "geo.py"]
    # Only the session one of whose requests passes none: its constructor's default applies there.
    assert [(f.line, f.code.partition("  #")[0]) for f in timeouts] == [
        (21, "async with aiohttp.ClientSession() as session:")
    ]


def test_routes_from_a_sum_of_imported_path_endpoint_lists_include_a_class_endpoints_methods(
    report: Report,
) -> None:
    for code, route in [
        ('request.app.state.redis.hgetall("stock")', "Stock.get"),
        ('request.app.state.redis.delete("stock")', "Stock.delete"),
        ('(TEMPLATES / "about.html").read_text()', "about"),
    ]:
        assert f"route `{route}`" in _blocking(report, "pages.py", code).message


def test_a_base_http_middleware_no_module_names_again_is_not_reported(report: Report) -> None:
    # `Legacy` is defined and never added: neither it nor the file write in its dispatch is a finding.
    in_middleware = [(f.rule, f.code) for f in report.findings if f.path.name == "middleware.py"]
    assert in_middleware == [
        ("base-http-middleware", "class Timing(BaseHTTPMiddleware):  # expect: base-http-middleware")
    ]


def test_a_branch_the_call_sites_literal_arguments_or_defaults_rule_out_is_not_followed(report: Report) -> None:
    prompt = _blocking(report, "prompts.py", 'with open(f"/srv/prompts/{key}.txt") as file:')
    # `prompt_text("summary")` returns from the built-in table first: only the route passing any key opens.
    assert _chain(prompt)[:2] == [
        ("any_prompt", "async def any_prompt(key: str):"),
        ("any_prompt", 'return {"text": prompt_text(key)}'),
    ]
    assert not any(f.chain and f.chain[0].function == "summary_prompt" for f in report.findings)
    rmtree = _blocking(report, "prompts.py", "shutil.rmtree(path)")
    # `rebuild("/srv/venv")` keeps `force=False`; only the route passing `force=True` deletes.
    assert _chain(rmtree)[0] == ("force_venv", "async def force_venv():")
    # `pip` is None at both call sites, by default and by literal: the install never runs.
    assert not [f for f in report.findings if "subprocess.run" in f.code and f.path.name == "prompts.py"]
    fresh = _blocking(report, "prompts.py", 'with open(f"/srv/templates/{name}") as file:')
    # `template(name)` and `template(name, True)` keep the cache; the chain is the call that passes False.
    assert _chain(fresh)[-1][0] == "read_template"
    assert "cached=False" in _chain(fresh)[-1][1]


def test_work_a_guard_or_a_cache_does_once_per_process_is_a_note_and_a_guard_that_keeps_nothing_is_not(
    report: Report,
) -> None:
    notes = [f for f in report.findings if f.rule == "blocking-call" and f.severity == "note"]
    # The app's blocking-call notes are one, with every place listed.
    assert len(notes) == 1
    places = {(notes[0].path.name, notes[0].code.split("  #")[0])}
    places.update((p.path.name, p.code.split("  #")[0]) for p in notes[0].related)
    # `if self._weights is None:` then assigns it; `global _CONFIG` kept after an early return; lru_cache.
    assert {
        ("loaders.py", 'with open("/srv/model.bin", "rb") as file:'),
        ("loaders.py", '_CONFIG = json.loads(Path("/srv/config.json").read_text())'),
        ("loaders.py", 'return Path("/srv/schema.json").read_text()'),
    } <= places
    assert "once per process" in notes[0].message
    # The labels guard returns what it read without keeping it: every request opens the file.
    labels = _blocking(report, "loaders.py", 'with open("/srv/labels.txt") as file:')
    assert labels.severity is None
    assert _chain(labels)[-1] == ("classify", _chain(labels)[-1][1])


@pytest.mark.parametrize(
    ("file", "code", "resolved"),
    [
        ("jobs.py", "QUEUE.enqueue(rebuild_index, dataset)", "rq.Queue().enqueue"),
        ("jobs.py", "Job.fetch(key, connection=REDIS)", "rq.job.Job.fetch"),
        ("jobs.py", "return found.get_status()", "rq.job.Job().get_status"),
        ("jobs.py", "queued = rebuild_index.delay(name)", "rq.decorators.job().delay"),
        ("jobs.py", "return self.backend.user_data(token)", "social_core.backends.base.BaseAuth().user_data"),
        ("jobs.py", "return self._backend.user_data(token)", "social_core.backends.base.BaseAuth().user_data"),
        ("jobs.py", 'with FileLock(f"{path}.lock"):', "filelock.FileLock().__enter__"),
        ("jobs.py", "fcntl.flock(file.fileno(), fcntl.LOCK_EX)", "fcntl.flock"),
        ("jobs.py", "fcntl.lockf(file.fileno(), fcntl.LOCK_UN)", "fcntl.lockf"),
        ("jobs.py", "venv.create(path, with_pip=True)", "venv.create"),
    ],
)
def test_rq_social_core_file_locks_and_venv_creation_block_when_an_async_route_reaches_them(
    report: Report, file: str, code: str, resolved: str
) -> None:
    found_ = [f for f in report.findings if f.rule == "blocking-call" and code in f.code]
    assert len(found_) == 1, (code, [f.code for f in report.findings if f.path.name == file])
    assert callee(found_[0]) == resolved
    assert found_[0].severity is None


def test_an_instance_made_from_a_parameter_annotated_type_of_a_class_is_that_class(report: Report) -> None:
    profile = _blocking(report, "jobs.py", "return self._backend.user_data(token)")
    assert callee(profile) == "social_core.backends.base.BaseAuth().user_data"
    assert _chain(profile)[-1] == ("rebuild", 'made.profile("t")')
