"""Every `@hot` route's edge cases, sent through the hot lane and through FastAPI alone: same answers.

The routes are the lane's own: every `@hot` route it derives from the app must have rows in
`cases_by_route()`, so a new one without them fails here, named. Two apps on the same stack, one with
the lane (the default) and one with TENK_HOT_LANE=false. Each row is sent to both, with the same
X-Request-ID; status, body (generated ids and vendor timestamps masked) and every header, names, values
and order, must be equal (Content-Length need only be its own body's length, as masked values may differ
in length). The `lane` column says whether the lane itself must answer (True), must leave the request to
FastAPI (False), or may do either (None), so the table also pins what the derived parsers accept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from starlette.types import Scope

from harness.clients import AUTH, TEST_CURSOR_SECRET
from harness.stack import Stack
from tenk.app import create_app
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tenk.platform.edge import TenkAPI
from tenk.platform.fast_paths import FastPath
from tenk.platform.lane import HotCall
from tenk.platform.pagination import cursor_codec
from tenk.stack import free_port
from tests.support.inprocess import app_in_process

# The lane's own behaviour: with the stock switch FastAPI's routing serves these routes instead.
pytestmark = pytest.mark.fast_path(FastPath.HOT_LANE)

BIG = "9" * 5000
MAX_ID = 2**63 - 1
EVENT = {"source": "lanes-test", "ts": "2026-01-01T00:00:00Z", "payload": {"n": 1}}
WRONG_KEY = {"Authorization": "Bearer tk_not_a_key"}
LIMIT = 4096  # TENK_MAX_BODY_BYTES for both apps, so that "too large" is cheap to send


def _signed(scope: str, payload: bytes, secret: str = TEST_CURSOR_SECRET) -> str:
    """A cursor over any payload bytes, signed as the service signs (to reach the checks behind the MAC)."""
    key = hashlib.sha256(f"{scope}\x00{secret}".encode()).digest()
    mac = hmac.digest(key, payload, "sha256")[:12]
    return base64.urlsafe_b64encode(payload + mac).rstrip(b"=").decode()


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    # An iterator body: httpx sends it without Content-Length.
    for start in range(0, len(body), 1000):
        yield body[start : start + 1000]


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    url: str
    lane: bool | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    chunked: bool = False
    auth_reads: bool = False
    creates: bool = False  # the answer names a new row: its id, timestamps and Location are masked


TASK_CURSOR = cursor_codec(TEST_CURSOR_SECRET, "tasks").encode([5])
# Correctly signed, wrongly shaped: each must be a 422 before Postgres sees it.
SIGNED_BAD_TASK_POSITIONS = [
    b"[9223372036854775808]",
    b"[-18446744073709551616]",
    b'["5"]',
    b"[true]",
    b"[5, 6]",
    b"{}",
]
NOT_JSON = b"{not json"
EVENT_UUID = "00000000-0000-0000-0000-000000000001"


def _events_cursor(key: str) -> str:
    return _signed("events", orjson.dumps([key]))


def _id_cases(route: str) -> list[Case]:
    return [
        Case(f"{route} id 0", "GET", f"{route}/0", False),
        Case(f"{route} id 1", "GET", f"{route}/1", True),
        Case(f"{route} id 2", "GET", f"{route}/2", True),
        Case(f"{route} id 2^63-1 (missing)", "GET", f"{route}/{MAX_ID}", True),
        Case(f"{route} id 2^63", "GET", f"{route}/{MAX_ID + 1}", False),
        Case(f"{route} id 007", "GET", f"{route}/007", False),
        Case(f"{route} id -1", "GET", f"{route}/-1", False),
        Case(f"{route} id unicode digits", "GET", f"{route}/%D9%A1%D9%A2", False),
        Case(f"{route} id fullwidth digit", "GET", f"{route}/%EF%BC%91", False),
        Case(f"{route} id 5,000 digits", "GET", f"{route}/{BIG}", False),
        Case(f"{route} id 1.0", "GET", f"{route}/1.0", False),
        Case(f"{route} id +1", "GET", f"{route}/+1", False),
        Case(f"{route} id with space", "GET", f"{route}/%201", False),
        Case(f"{route} unknown query param", "GET", f"{route}/3?x=1&x=2", True),
        Case(f"{route} no key, reads need one", "GET", f"{route}/1", True, auth_reads=True),
        Case(f"{route} wrong key, reads need one", "GET", f"{route}/1", True, WRONG_KEY, auth_reads=True),
        Case(f"{route} key, reads need one", "GET", f"{route}/1", True, AUTH, auth_reads=True),
        Case(f"{route} bad id and no key, reads need one", "GET", f"{route}/0", False, auth_reads=True),
    ]


def _page_cases(route: str, scope: str, cursor: str, max_limit: int, key: dict[str, str] | None = None) -> list[Case]:
    # `key`: what every case but the keyless one sends (stored events need a reader key by default).
    key = key or {}
    forged = cursor_codec("not-the-secret", scope).encode([5] if scope == "tasks" else ["x"])
    return [
        Case(f"{route} defaults", "GET", route, True, key),
        *[
            Case(
                f"{route} limit={limit or 'empty'}",
                "GET",
                f"{route}?limit={limit}",
                limit in ("1", "100") or (limit == "101" and max_limit > 100),
                key,
            )
            for limit in ("0", "1", "100", "101", "", "007", "-1", "%D9%A1", BIG)
        ],
        Case(f"{route} limit twice", "GET", f"{route}?limit=5&limit=6", False, key),
        Case(f"{route} unknown param", "GET", f"{route}?limit=5&colour=red", True, key),
        Case(f"{route} unknown param twice", "GET", f"{route}?colour=red&colour=blue", True, key),
        Case(f"{route} valid cursor", "GET", f"{route}?after={cursor}", True, key),
        Case(f"{route} empty cursor", "GET", f"{route}?after=", True, key),
        Case(
            f"{route} tampered cursor",
            "GET",
            f"{route}?after={cursor[:-2]}{'AA' if cursor[-2:] != 'AA' else 'BB'}",
            True,
            key,
        ),
        Case(f"{route} truncated cursor", "GET", f"{route}?after={cursor[:-3]}", True, key),
        Case(f"{route} forged cursor", "GET", f"{route}?after={forged}", True, key),
        Case(f"{route} garbage cursor", "GET", f"{route}?after=%%%", True, key),
        Case(f"{route} signed non-JSON cursor", "GET", f"{route}?after={_signed(scope, NOT_JSON)}", True, key),
        Case(f"{route} cursor over 512 chars", "GET", f"{route}?after={'A' * 513}", False, key),
        Case(f"{route} cursor of another resource", "GET", f"{route}?after={_signed('products', b'[5]')}", True, key),
        Case(f"{route} no key, reads need one", "GET", route, True, auth_reads=True),
    ]


def _post_cases(route: str, good: bytes) -> list[Case]:
    too_large = b"[" + b" " * LIMIT + b"]"
    return [
        Case(f"{route} accepted", "POST", route, True, AUTH, good),
        Case(f"{route} no key", "POST", route, True, {}, good),
        Case(f"{route} wrong key", "POST", route, True, WRONG_KEY, good),
        Case(f"{route} basic auth", "POST", route, True, {"Authorization": "Basic eDp5"}, good),
        Case(
            f"{route} key with extra spaces",
            "POST",
            route,
            True,
            {"Authorization": "Bearer   " + AUTH["Authorization"][7:]},
            good,
        ),
        Case(f"{route} not JSON", "POST", route, True, AUTH, b"{nope"),
        Case(f"{route} empty body", "POST", route, True, AUTH, b""),
        Case(f"{route} too large, with length", "POST", route, True, AUTH, too_large),
        Case(f"{route} too large, chunked", "POST", route, True, AUTH, too_large, chunked=True),
        Case(f"{route} chunked, fits", "POST", route, True, AUTH, good, chunked=True),
        Case(f"{route} too large with length, no key", "POST", route, True, {}, too_large),
        Case(
            f"{route} declared length of 5,000 digits",
            "POST",
            route,
            True,
            {**AUTH, "Content-Length": BIG},
            good,
        ),
    ]


TASK = orjson.dumps({"title": "lanes", "notes": "both", "done": True})
JSON_TYPE = {"Content-Type": "application/json"}


def _task_cases() -> list[Case]:
    """POST /tasks: a pydantic body. The lane takes a plain JSON Content-Type and parses as FastAPI does;
    whatever does not validate is read again by FastAPI, which words the error."""
    key = {**AUTH, **JSON_TYPE}

    def post(name: str, body: bytes, lane: bool, headers: dict[str, str] = key, chunked: bool = False) -> Case:
        return Case(f"/tasks POST {name}", "POST", "/tasks", lane, headers, body, chunked, creates=True)

    return [
        post("accepted", TASK, True),
        post("defaults", b'{"title": "t"}', True),
        post("charset parameter", TASK, True, {**AUTH, "Content-Type": "application/json; charset=utf-8"}),
        post("upper-case type", TASK, True, {**AUTH, "Content-Type": "Application/JSON"}),
        post("chunked", TASK, True, chunked=True),
        post("done as the string true", b'{"title": "t", "done": "true"}', True),
        post("a key twice", b'{"title": "a", "title": "b"}', True),
        post("no Content-Type", TASK, False, AUTH),
        post("text/plain", TASK, False, {**AUTH, "Content-Type": "text/plain"}),
        post("+json type", TASK, False, {**AUTH, "Content-Type": "application/vnd.tenk+json"}),
        post("not JSON", b"{nope", True),
        post("empty body", b"", True),
        post("not UTF-8", b'{"title": "\xff\xfe"}', True),
        post("nested 3,000 deep", b"[" * 3000 + b"]" * 3000, True),
        post("an array", b"[]", True),
        post("no title", b'{"notes": "n"}', True),
        post("empty title", b'{"title": ""}', True),
        post("title of 201", orjson.dumps({"title": "x" * 201}), True),
        post("title with NUL", b'{"title": "a\\u0000b"}', True),
        post("title a number", b'{"title": 5}', True),
        post("done yes", b'{"title": "t", "done": "yes"}', True),
        post("done NaN", b'{"title": "t", "done": NaN}', True),
        # What json.loads reads and orjson refuses: the hot lane must leave them to FastAPI.
        post("a UTF-8 BOM", b"\xef\xbb\xbf" + TASK, True),
        post("UTF-16", TASK.decode().encode("utf-16"), True),
        post("done an int past 64 bits", b'{"title": "t", "done": 123456789012345678901234567890}', True),
        post("unknown field", b'{"title": "t", "colour": "red"}', True),
        post("no key", TASK, True, JSON_TYPE),
        post("wrong key", TASK, True, {**WRONG_KEY, **JSON_TYPE}),
        post("too large", b'{"title": "' + b"x" * LIMIT + b'"}', True),
    ]


def cases_by_route() -> dict[str, list[Case]]:
    """Each `@hot` route's rows, by the route as the lane names it (method and template): the test asks
    the lane for its routes and requires rows for every one."""
    source = "/sources/lanes-test/events"
    return {
        "GET /products/{product_id}": _id_cases("/products"),
        "GET /tasks/{task_id}": _id_cases("/tasks"),
        "POST /tasks": _task_cases(),
        "GET /ping": [Case("/ping", "GET", "/ping", True), Case("/ping with a query", "GET", "/ping?x=1", True)],
        "GET /health": [Case("/health", "GET", "/health", True)],
        "GET /tasks": [
            *_page_cases("/tasks", "tasks", TASK_CURSOR, 100),
            *[
                Case(f"/tasks signed cursor {payload!r}", "GET", f"/tasks?after={_signed('tasks', payload)}", True)
                for payload in SIGNED_BAD_TASK_POSITIONS
            ],
        ],
        "GET /sources/{source}/events": [
            *_page_cases(source, "events", _events_cursor(f"2026-01-01 00:00:00+00|{EVENT_UUID}"), 500, AUTH),
            Case(f"{source} bad source", "GET", "/sources/bad%20source/events", False, AUTH),
            Case(f"{source} source of 65", "GET", f"/sources/{'a' * 65}/events", False, AUTH),
            # A control character in the path: the edge refuses it before either lane matches (tests/test_edge.py).
            Case(f"{source} source with newline", "GET", "/sources/abc%0A/events", None, AUTH),
            Case(f"{source} limit 500", "GET", f"{source}?limit=500", True, AUTH),
            Case(f"{source} no key, events are private", "GET", source, True),
            Case(f"{source} wrong key, events are private", "GET", source, True, WRONG_KEY),
            Case(f"{source} bad source and no key", "GET", "/sources/bad%20source/events", False),
            Case(f"{source} limit 501", "GET", f"{source}?limit=501", False, AUTH),
            *[
                Case(f"{source} signed cursor {key!r}", "GET", f"{source}?after={_events_cursor(key)}", True, AUTH)
                for key in (
                    f"not-a-time|{EVENT_UUID}",
                    f"2026-01-01 00:00:00+20:00|{EVENT_UUID}",
                    f"2026-01-01 00:00:00|{EVENT_UUID}",
                    f"0001-01-01 00:00:00+05|{EVENT_UUID}",
                    "2026-01-01 00:00:00+00|not-a-uuid",
                    "no-separator",
                    f"99999-01-01 00:00:00+00|{EVENT_UUID}",
                )
            ],
        ],
        "GET /search": [
            Case("/search words", "GET", "/search?q=kettle%20lamp&limit=3", True),
            Case("/search web syntax", "GET", "/search?q=%22wireless%20kettle%22%20-ceramic%20or%20lamp", True),
            Case("/search blank", "GET", "/search?q=%20%20", True),
            Case("/search no reader key", "GET", "/search?q=kettle", True, auth_reads=True),
            Case("/search NUL", "GET", "/search?q=a%00b", False),
            Case("/search too long", "GET", f"/search?q={'x' * 201}", False),
            Case("/search no q", "GET", "/search", False),
            Case("/search limit 51", "GET", "/search?q=kettle&limit=51", False),
            Case("/search q twice", "GET", "/search?q=kettle&q=lamp", False),
        ],
        "GET /quotes/{symbol}": [
            Case("/quotes AAPL", "GET", "/quotes/AAPL", True),
            Case("/quotes lower case", "GET", "/quotes/aapl", False),
            Case("/quotes too long", "GET", "/quotes/ABCDEFGHIJKLM", False),
            Case("/quotes leading dot", "GET", "/quotes/.A", False),
            Case("/quotes trailing newline", "GET", "/quotes/AAPL%0A", None),
            Case("/quotes unicode", "GET", "/quotes/%C3%85", False),
        ],
        "POST /events": _post_cases("/events", orjson.dumps(EVENT)),
        "POST /events/batch": [
            *_post_cases("/events/batch", orjson.dumps([EVENT, EVENT])),
            Case(
                "/events/batch NDJSON",
                "POST",
                "/events/batch",
                True,
                {**AUTH, "Content-Type": "application/x-ndjson"},
                orjson.dumps(EVENT) + b"\n" + orjson.dumps(EVENT),
            ),
            Case(
                "/events/batch too many",
                "POST",
                "/events/batch",
                True,
                AUTH,
                orjson.dumps([EVENT] * 1001)[:0] + b"[" + b",".join([b"{}"] * 1001) + b"]",
            ),
        ],
    }


_MASKED = re.compile(rb'"(ids|as_of_ms|price)":(\[[^\]]*\]|[0-9.]+)')
_NEW_ROW = re.compile(rb'"(id|created_at|updated_at)":("[^"]*"|[0-9]+)')
_NEW_LOCATION = re.compile(r"/[0-9]+$")


def _masked(body: bytes, creates: bool = False) -> bytes:
    body = _MASKED.sub(rb'"\1":"*"', body)
    return _NEW_ROW.sub(rb'"\1":"*"', body) if creates else body


def _counting(app: TenkAPI, served: list[bool]) -> TenkAPI:
    """Record whether the lane answered each request (False: it was left to FastAPI)."""
    lane = app.lane
    assert lane is not None
    match = lane.match

    def recording(scope: Scope) -> HotCall | None:
        found = match(scope)
        served.append(found is not None)
        return found

    lane.match = recording  # type: ignore[method-assign]
    return app


async def _send(client: httpx.AsyncClient, case: Case) -> httpx.Response:
    content: Any = case.body
    if case.chunked and case.body is not None:
        content = _chunks(case.body)
    # The same id to both lanes, so that the echoed header compares like any other.
    headers = {"X-Request-ID": "lanes-agree", **case.headers}
    return await client.request(case.method, case.url, headers=headers, content=content)


def _answer(response: httpx.Response, creates: bool = False) -> tuple[int, bytes, list[tuple[str, str]]]:
    """Status, masked body and every header in order; Content-Length checked against its own body."""
    headers = [
        (name, "<its body's length>" if name == "content-length" and value == str(len(response.content)) else value)
        for name, value in response.headers.multi_items()
    ]
    if creates:
        headers = [(name, _NEW_LOCATION.sub("/*", value) if name == "location" else value) for name, value in headers]
    return response.status_code, _masked(response.content, creates), headers


def hot_routes_without_cases(app: TenkAPI, cases: dict[str, list[Case]]) -> list[str]:
    """The app's `@hot` routes, as its lane derived them, that have no rows (or no rows but for a route the
    lane does not serve, named as such)."""
    assert app.lane is not None
    hot = {f"{route.method} {route.template}" for routes in app.lane.routes.values() for route in routes}
    return [
        *sorted(route for route in hot if not cases.get(route)),
        *sorted(f"{route} (rows, but not a hot route)" for route in set(cases) - hot),
    ]


def test_every_hot_route_of_the_app_has_rows(stack: Stack) -> None:
    missing = hot_routes_without_cases(create_app(stack.settings()), cases_by_route())
    assert not missing, f"@hot routes with no rows in cases_by_route(): {missing}"


async def test_every_hot_route_answers_the_same_in_both_lanes(stack: Stack, mock: MockUpstreamProcess) -> None:
    served: list[bool] = []
    mismatches: list[str] = []
    rows = cases_by_route()
    for auth_reads in (False, True):
        settings = stack.settings(max_body_bytes=LIMIT, auth_reads=auth_reads, upstream={"url": mock.url})
        lane_app = _counting(create_app(settings), served)
        assert not hot_routes_without_cases(lane_app, rows)
        plain_app = create_app(settings.model_copy(update={"hot_lane": False}))
        assert plain_app.lane is None
        async with app_in_process(lane_app) as lane, app_in_process(plain_app) as plain:
            for case in (case for cases in rows.values() for case in cases):
                if case.auth_reads != auth_reads:
                    continue
                served.clear()
                fast, full = await _send(lane, case), await _send(plain, case)
                got, want = _answer(fast, case.creates), _answer(full, case.creates)
                if got != want:
                    mismatches.append(
                        f"{case.name}: lane {got[0]} {got[1][:200]!r} {got[2]} != "
                        f"FastAPI {want[0]} {want[1][:200]!r} {want[2]}"
                    )
                assert full.status_code < 500, f"{case.name}: {full.status_code} {full.text[:300]}"
                if case.lane is not None and served != [case.lane]:
                    mismatches.append(f"{case.name}: lane answered {served}, expected {case.lane}")
    assert not mismatches, "\n".join(mismatches)


def _down_cases() -> list[Case]:
    """Rows answered while Postgres and Redis are unreachable: every one a 503 or a fallback, in both lanes."""
    source = "/sources/lanes-test/events"
    return [
        Case("down: /products/5", "GET", "/products/5", True),
        Case("down: /tasks/1", "GET", "/tasks/1", None),
        Case("down: /tasks", "GET", "/tasks?limit=3", True),
        Case(f"down: {source}", "GET", source, None, AUTH),
        Case("down: /search", "GET", "/search?q=kettle", None),
        Case("down: /events", "POST", "/events", True, AUTH, orjson.dumps(EVENT)),
        Case("down: /events/batch", "POST", "/events/batch", None, AUTH, orjson.dumps([EVENT, EVENT])),
    ]


async def test_with_postgres_and_redis_unreachable_both_lanes_answer_the_same_503_and_retry_after(
    stack: Stack, mock: MockUpstreamProcess
) -> None:
    dead = free_port()
    settings = stack.settings(
        database={"url": f"postgresql://postgres@127.0.0.1:{dead}/postgres"},
        redis={"url": f"redis://127.0.0.1:{dead}/0"},
        upstream={"url": mock.url},
    )
    mismatches: list[str] = []
    served: list[bool] = []
    async with (
        app_in_process(_counting(create_app(settings), served)) as lane,
        app_in_process(create_app(settings.model_copy(update={"hot_lane": False}))) as plain,
    ):
        for case in _down_cases():
            served.clear()
            fast, full = await _send(lane, case), await _send(plain, case)
            got, want = _answer(fast), _answer(full)
            if got != want:
                mismatches.append(f"{case.name}: lane {got} != FastAPI {want}")
            if case.lane is not None and served != [case.lane]:
                mismatches.append(f"{case.name}: lane answered {served}, expected {case.lane}")
            assert full.status_code == 503, f"{case.name}: {want}"
            assert full.headers.get("retry-after"), f"{case.name}: {want}"
    assert not mismatches, "\n".join(mismatches)
