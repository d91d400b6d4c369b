"""HttpArena's validation checks (`scripts/validate.sh` at 28606ba) for the profiles tenk enters, ported to Python.

Each check sends what validate.sh sends and judges the answer as it does; a check that fails raises
`AssertionError` naming what it got. The suite runs them against tenk's entry (tests/examples/httparena),
and `make bench-httparena` runs those of a profile against every entry before measuring it, so that no
entry is measured doing less than HttpArena asks.

The random values validate.sh draws (`$RANDOM % 900 + 100`) come from a seeded generator here, so that
a failure can be run again.
"""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

Check = Callable[[httpx.Client], None]


def _body(response: httpx.Response) -> str:
    # validate.sh compares the last line of curl's output: the body, stripped of its newline.
    return response.text.strip().split("\n")[-1] if response.text else ""


def _expect_body(response: httpx.Response, expected: str, what: str) -> None:
    assert _body(response) == expected, f"{what}: expected body {expected!r}, got {_body(response)!r}"


def _expect_type(response: httpx.Response, expected: str, what: str) -> None:
    value = response.headers.get("content-type", "")
    assert value == expected or value.startswith(expected + ";"), f"{what}: Content-Type {value!r}, not {expected}"


def _json(response: httpx.Response, what: str) -> Any:
    try:
        return response.json()
    except json.JSONDecodeError:
        raise AssertionError(f"{what}: not JSON: {response.text[:200]!r}") from None


def _chunked(body: bytes) -> Iterator[bytes]:
    # A generator body: httpx sends it with Transfer-Encoding: chunked, as curl does with that header.
    yield body


def baseline_sums(client: httpx.Client) -> None:
    """GET, POST with Content-Length and POST chunked: the sum of a, b and the body, as text/plain."""
    url = "/baseline11?a=13&b=42"
    _expect_body(client.get(url), "55", "GET /baseline11?a=13&b=42")
    plain = {"Content-Type": "text/plain"}
    posted = client.post(url, content=b"20", headers=plain)
    _expect_body(posted, "75", "POST /baseline11 body=20")
    chunked = client.post(url, content=_chunked(b"20"), headers=plain)
    _expect_body(chunked, "75", "POST /baseline11 chunked body=20")
    _expect_type(client.get(url), "text/plain", "GET /baseline11")
    _expect_type(posted, "text/plain", "POST /baseline11")


def baseline_anti_cheat(client: httpx.Client, rng: random.Random | None = None) -> None:
    """Random a and b, and two POSTs with different random bodies: no hard-coded or cached answer."""
    rng = rng or random.Random(1)
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    _expect_body(client.get(f"/baseline11?a={a}&b={b}"), str(a + b), f"GET /baseline11?a={a}&b={b}")
    first, second = rng.sample(range(100, 1000), 2)
    for body in (first, second):
        answer = client.post("/baseline11?a=13&b=42", content=b"%d" % body, headers={"Content-Type": "text/plain"})
        _expect_body(answer, str(55 + body), f"POST body={body}")


# The four fragmented requests of validate.sh, each as its writes, and the body each must answer.
FRAGMENTS: dict[str, tuple[str, list[bytes]]] = {
    "split request line": (
        "55",
        [b"GET /baseli", b"ne11?a=13&b=42 HTTP/1.1\r\n", b"Host: localhost\r\nConnection: close\r\n\r\n"],
    ),
    "split before headers": (
        "55",
        [
            b"GET /baseline11?a=13&b=42 HTTP/1.1\r\n",
            b"Host: localhost\r\n",
            b"User-Agent: arena-frag/1.0\r\n",
            b"Connection: close\r\n\r\n",
        ],
    ),
    "split headers/body": (
        "75",
        [
            b"POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n",
            b"20",
        ],
    ),
    "split body bytes": (
        "75",
        [
            b"POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n",
            b"2",
            b"0",
        ],
    ),
}
# validate.sh's pause between fragments: what makes the server see each as its own read.
FRAGMENT_PAUSE_S = 0.03


def send_fragmented(base_url: str, fragments: list[bytes]) -> str:
    """validate.sh's `check_fragmented`: the writes over one socket (no Nagle), then the body until EOF."""
    parts = urlsplit(base_url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=5) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for index, fragment in enumerate(fragments):
            sock.sendall(fragment)
            if index < len(fragments) - 1:
                time.sleep(FRAGMENT_PAUSE_S)  # the stimulus itself, not a wait for anything
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    head, _, raw = received.decode("latin-1").partition("\r\n\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in head.split("\r\n")[1:])
    }
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body, rest = "", raw
        while rest:
            size_text, _, rest = rest.partition("\r\n")
            size = int(size_text.split(";", 1)[0], 16)
            if size == 0:
                break
            body, rest = body + rest[:size], rest[size + 2 :]
        return body.strip()
    if "content-length" in headers:
        return raw[: int(headers["content-length"])].strip()
    return raw.strip()


def baseline_fragmented(client: httpx.Client) -> None:
    """Each request in several TCP writes 30 ms apart: the parser must put them together."""
    for name, (expected, fragments) in FRAGMENTS.items():
        got = send_fragmented(str(client.base_url), fragments)
        assert got == expected, f"/baseline11, {name}: expected body {expected!r}, got {got!r}"


def json_totals(client: httpx.Client) -> None:
    """GET /json/{count}?m= for counts the benchmark does not use: count items, each total price x quantity x m."""
    for count, m in ((12, 3), (22, 7), (31, 2), (50, 5)):
        what = f"GET /json/{count}?m={m}"
        data = _json(client.get(f"/json/{count}?m={m}"), what)
        items = data.get("items", [])
        assert data.get("count") == count, f"{what}: count {data.get('count')}"
        assert len(items) == count, f"{what}: {len(items)} items"
        wrong = [item for item in items if item.get("total") != item["price"] * item["quantity"] * m]
        assert not wrong, f"{what}: wrong totals, first {wrong[0]}"
    _expect_type(client.get("/json/50?m=1"), "application/json", "GET /json/50?m=1")


def async_db_rows(client: httpx.Client) -> None:
    """Varying price ranges and limits: `limit` items, each with rating.score, a tags array and a boolean active."""
    for query, limit in (
        ("min=5&max=80&limit=7", 7),
        ("min=20&max=150&limit=18", 18),
        ("min=100&max=400&limit=33", 33),
        ("min=10&max=50&limit=50", 50),
    ):
        what = f"GET /async-db?{query}"
        data = _json(client.get(f"/async-db?{query}"), what)
        items = data.get("items", [])
        assert data.get("count") == limit, f"{what}: count {data.get('count')}, not {limit}"
        assert all("score" in (item.get("rating") or {}) for item in items), f"{what}: an item without rating.score"
        assert all(isinstance(item.get("tags"), list) for item in items), f"{what}: tags not an array"
        assert all(isinstance(item.get("active"), bool) for item in items), f"{what}: active not a boolean"
    _expect_type(client.get("/async-db?min=10&max=50&limit=50"), "application/json", "GET /async-db")


def async_db_empty_range(client: httpx.Client) -> None:
    """A price range no item has answers count 0: the parameters reach the query."""
    data = _json(client.get("/async-db?min=9999&max=9999&limit=50"), "GET /async-db empty range")
    assert data.get("count") == 0, f"GET /async-db?min=9999&max=9999: count {data.get('count')}, not 0"


def crud_list(client: httpx.Client) -> None:
    """A page of a category: 5 items, total > 0, page 1, every item with its rating."""
    data = _json(client.get("/crud/items?category=electronics&page=1&limit=5"), "GET /crud/items")
    items = data.get("items", [])
    assert len(items) == 5, f"GET /crud/items: {len(items)} items, not 5"
    assert data.get("total", 0) > 0, f"GET /crud/items: total {data.get('total')}"
    assert data.get("page") == 1, f"GET /crud/items: page {data.get('page')}"
    assert all("rating" in item for item in items), "GET /crud/items: an item without rating"


def _x_cache(client: httpx.Client, path: str) -> str:
    return str(client.get(path).headers.get("x-cache", ""))


def crud_read_and_cache(client: httpx.Client) -> None:
    """GET by id; two reads of another id, MISS then HIT; an id that is not there, 404."""
    item = _json(client.get("/crud/items/1"), "GET /crud/items/1")
    assert item.get("id") == 1, f"GET /crud/items/1: id {item.get('id')}"
    first, second = _x_cache(client, "/crud/items/42"), _x_cache(client, "/crud/items/42")
    assert (first, second) == ("MISS", "HIT"), f"X-Cache: expected MISS then HIT, got {first!r} then {second!r}"
    status = client.get("/crud/items/999999").status_code
    assert status == 404, f"GET /crud/items/999999: HTTP {status}, not 404"


def crud_create_and_update(client: httpx.Client) -> None:
    """POST creates 200001 (201) and it reads back; after a read, a PUT (200) leaves the next read a MISS."""
    body = {"id": 200001, "name": "ValidateItem", "category": "test", "price": 42, "quantity": 7}
    status = client.post("/crud/items", json=body).status_code
    assert status == 201, f"POST /crud/items: HTTP {status}, not 201"
    read = _json(client.get("/crud/items/200001"), "GET /crud/items/200001")
    assert read.get("id") == 200001, f"GET /crud/items/200001 after the POST: id {read.get('id')}"
    client.get("/crud/items/200001")  # warms the cache
    update = {"name": "UpdatedItem", "category": "test", "price": 99, "quantity": 1}
    status = client.put("/crud/items/200001", json=update).status_code
    after = _x_cache(client, "/crud/items/200001")
    assert (status, after) == (200, "MISS"), f"PUT /crud/items/200001: HTTP {status}, then X-Cache {after!r}"


@dataclass(frozen=True)
class Profile:
    name: str
    checks: tuple[Check, ...]


BASELINE = (baseline_sums, baseline_anti_cheat, baseline_fragmented)
JSON = (json_totals,)
ASYNC_DB = (async_db_rows, async_db_empty_range)
# validate.sh runs the async-db checks for a crud entry too.
CRUD = (*ASYNC_DB, crud_list, crud_read_and_cache, crud_create_and_update)
PROFILES = {
    "baseline": Profile("baseline", BASELINE),
    "json": Profile("json", JSON),
    "async-db": Profile("async-db", ASYNC_DB),
    # api-4 subscribes to the checks of each endpoint it mixes.
    "api-4": Profile("api-4", (*BASELINE, *JSON, *ASYNC_DB)),
    "crud": Profile("crud", CRUD),
}


def failures(base_url: str, profile: str) -> list[str]:
    """Every check of `profile` against the server at `base_url`: what failed, in validate.sh's order."""
    found = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for check in PROFILES[profile].checks:
            try:
                check(client)
            except (AssertionError, httpx.HTTPError, OSError, ValueError) as exc:
                found.append(f"{check.__name__}: {exc}")
    return found
