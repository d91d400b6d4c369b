"""Any string in any field of a mix is refused by the loader, naming the field, or reaches the k6 and wrk
scripts as data: the script parses, its top-level statements (k6) or globals (wrk) are those a benign
value gives, and the string comes out of the script's literals as it went in.

k6's script is read with a JavaScript parser (esprima). wrk's is run in LuaJIT (wrk's own Lua, through
lupa) inside an environment that holds only what the script needs, and each request builder is called
to see the path and body wrk would send.
"""

from __future__ import annotations

import functools
import json
import string
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import esprima
import pytest
import tomli_w
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from lupa import luajit21

from tenk.lab.definition.mixes import PLACEHOLDER, Mix, load_mix
from tenk.lab.driving.k6 import k6_binary
from tenk.lab.driving.k6script import k6_script
from tenk.lab.driving.wrk import wrk_script
from tenk.lab.errors import ConfigError

# A benign value for every field, one the loader takes, and which cannot be part of the script's own text.
BENIGN = "Benign0"
# What breaks out of a JavaScript or Lua string, a comment or a request line, and the issue's payload.
PAYLOAD = "after=' + ''; } const STOLEN = open('/etc/hostname'); export function ep_x() { let z = '"
TRICKY = [
    "'", '"', "\\", "`", "${", "\n", "\r", "\r\n", "\t", "\x00", "\x1b[2J", "\x7f", "\x85", "\u2028", "\u2029",
    "</script>", "<!--", "-->", "*/", "/*", "//", "--", "[[", "]]", "]=]", "\\u00e9", "\\x41", "\\065", "%",
    "%2F", " ", "#", "?", "&", "=", "é", "😀", "\ufeff", "{uid}", "{word}", "{id}", "{nope}", "{", "}",
    "ep_page", "VALUES_word", "/", ".", "realistic", "x" * 300, PAYLOAD,
]  # fmt: skip
strings = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(TRICKY)), max_size=6).map("".join)

Document = dict[str, Any]
Shown = Literal["literal", "name", "comment", "nowhere"]


def _base() -> Document:
    return {
        "name": "fuzz",
        "description": "one of each field",
        "vars": {"word": {"list": ["alpha", 7]}, "id": {"range": [1, 9]}},
        "endpoint": [
            {
                "name": "page",
                "kind": "db",
                "path": "/tasks?limit=20",
                "weight": 3,
                "cursor": {"param": "after", "field": "next"},
            },
            {
                "name": "write",
                "kind": "write",
                "method": "POST",
                "path": "/items/{id}",
                "weight": 1,
                "auth": True,
                "body": {"title": "t {word}", "tags": ["a"], "count": "{id}"},
                "check_json": {"title": "t {word}"},
            },
        ],
    }


def _new_key(table: Document, key: str, value: Any) -> None:
    assume(key not in table)  # a key the base has already would change the mix, not only the string
    table[key] = value


def _set(*keys: str | int) -> Callable[[Document, str], None]:
    def place(document: Document, value: str) -> None:
        table: Any = document
        for key in keys[:-1]:
            table = table[key]
        table[keys[-1]] = value

    return place


def _variant(key: str) -> Callable[[Document, str], None]:
    def place(document: Document, value: str) -> None:
        document.clear()
        document["based_on"] = "realistic"
        document[key] = [value] if key == "leave_out" else value

    return place


@dataclass(frozen=True)
class Field:
    """Where a string goes in a mix (after `prefix`), what a refusal of it names, how it shows in the k6
    script, and where wrk sends it (the n-th endpoint's path or body)."""

    label: str
    place: Callable[[Document, str], None]
    refusal: str
    shown: Shown
    sent: tuple[int, Literal["path", "body"]] | None = None
    prefix: str = ""


FIELDS = [
    Field("name", _set("name"), "name", "comment"),
    Field("description", _set("description"), "description", "nowhere"),
    Field("endpoint name", _set("endpoint", 0, "name"), ".name", "name"),
    Field("kind", _set("endpoint", 0, "kind"), "endpoint[1].kind", "literal"),
    Field("path", _set("endpoint", 0, "path"), "endpoint[1].path", "literal", (0, "path"), prefix="/"),
    Field("cursor param", _set("endpoint", 0, "cursor", "param"), "param", "literal"),
    Field("cursor field", _set("endpoint", 0, "cursor", "field"), "field", "literal"),
    Field(
        "body key", lambda d, v: _new_key(d["endpoint"][1]["body"], v, "v"), "endpoint[2].body", "literal", (1, "body")
    ),
    Field("body value", _set("endpoint", 1, "body", "title"), "endpoint[2].body", "literal", (1, "body")),
    Field("body list item", _set("endpoint", 1, "body", "tags", 0), "endpoint[2].body", "literal", (1, "body")),
    Field("body as text", _set("endpoint", 1, "body"), "endpoint[2].body", "literal", (1, "body")),
    Field("check_json key", lambda d, v: _new_key(d["endpoint"][1]["check_json"], v, "x"), "check_json", "literal"),
    Field("check_json value", _set("endpoint", 1, "check_json", "title"), "check_json", "literal"),
    Field("generator value", lambda d, v: d["vars"]["word"].update(list=[v]), "vars.word", "literal", (1, "body")),
    Field("generator name", lambda d, v: _new_key(d["vars"], v, {"list": ["x"]}), "vars", "name"),
    Field("based_on", _variant("based_on"), "based_on", "nowhere"),
    Field("leave_out", _variant("leave_out"), "leave_out", "nowhere"),
]


def _loaded(field: Field, value: str, tmp: Path) -> Mix | None:
    """The mix with `value` in `field`, or None when the loader refuses it, having named the field."""
    document = _base()
    field.place(document, field.prefix + value)
    path = tmp / "mix.toml"
    path.write_text(tomli_w.dumps(document), encoding="utf-8")
    try:
        return load_mix(str(path))
    except ConfigError as exc:
        refused = exc
    assert field.refusal in refused.key, f"{field.label}: the refusal names {refused.key!r}: {refused}"
    return None


@functools.cache
def _benign(label: str) -> Mix | None:
    with tempfile.TemporaryDirectory() as tmp:
        return _loaded(next(field for field in FIELDS if field.label == label), BENIGN, Path(tmp))


def _pieces(value: str) -> list[str]:
    """The text of `value` between its placeholders: what must come out of a literal as it went in."""
    return [piece for i, piece in enumerate(PLACEHOLDER.split(value)) if i % 2 == 0 and piece]


def _nodes(node: Any) -> Iterator[Any]:
    """Every node under `node` of esprima's tree."""
    if isinstance(node, esprima.nodes.Node):
        yield node
        for child in vars(node).values():
            yield from _nodes(child)
    elif isinstance(node, list):
        for child in node:
            yield from _nodes(child)


@dataclass(frozen=True)
class K6Script:
    shape: list[tuple[str, tuple[str, ...]]]
    literals: list[str]
    identifiers: set[str]
    comments: list[str]


def _k6(mix: Mix) -> K6Script:
    module = esprima.parseModule(k6_script(mix, rate=60, duration_s=5), {"comment": True})
    shape = []
    for statement in module.body:
        declared = getattr(statement, "declaration", None) or statement
        names = [d.id.name for d in getattr(declared, "declarations", None) or [] if d.id.type == "Identifier"]
        if getattr(declared, "id", None) is not None:
            names.append(declared.id.name)
        shape.append((statement.type, tuple(names)))
    nodes = list(_nodes(module.body))
    return K6Script(
        shape=shape,
        literals=[_utf16(n.value) for n in nodes if n.type == "Literal" and isinstance(n.value, str)],
        identifiers={n.name for n in nodes if n.type == "Identifier"},
        comments=[comment.value for comment in module.comments],
    )


def _utf16(text: str) -> str:
    """A string as JavaScript holds it: esprima leaves an escaped surrogate pair as two code points."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")


Shape = list[tuple[str, tuple[str, ...]]]


def _benign_shape(field: Field, value: str, shape: Callable[[Mix], Shape]) -> Shape | None:
    """The shape a benign value gives the script, where `value` (a name) stands for it in names; None
    when the loader refuses the benign value too."""
    benign = _benign(field.label)
    if benign is None:
        return None
    expected = shape(benign)
    if field.shown != "name":
        return expected
    return [(kind, tuple(name.replace(BENIGN, value) for name in names)) for kind, names in expected]


def _every_field(test: Callable[[Field, str, Path], None]) -> Callable[..., None]:
    """Run `test` for every field, with strings drawn by hypothesis and the issue's payload."""
    # "zz": a name that sorts after the benign one's place among wrk's globals.
    drawn = example(value="zz")(example(value=PAYLOAD)(test))
    drawn = given(value=strings)(drawn)
    drawn = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])(drawn)
    marked: Callable[..., None] = pytest.mark.parametrize("field", FIELDS, ids=[field.label for field in FIELDS])(drawn)
    return marked


def _mix_name(comment: str) -> Any:
    """The mix's name, decoded from the script's first comment."""
    return json.loads(comment.split(" from mix ", 1)[1].rsplit(" at ", 1)[0])


@_every_field
def test_any_mix_string_is_refused_or_reaches_k6_as_data(field: Field, value: str, tmp_path: Path) -> None:
    mix = _loaded(field, value, tmp_path)
    if mix is None:
        return
    script = _k6(mix)
    expected = _benign_shape(field, value, lambda benign: _k6(benign).shape)
    assert expected is None or script.shape == expected
    if field.shown == "literal":
        for piece in _pieces(field.prefix + value):
            assert any(piece in literal for literal in script.literals), f"{piece!r} is no string literal's"
    elif field.shown == "name":
        assert any(value in name for name in script.identifiers)
    elif field.shown == "comment":
        assert _mix_name(script.comments[0]) == value


# What the script may reach in wrk: the libraries it calls, wrk's request formatter, no file and no process.
_SANDBOX = """
function(source, format)
  local env = {
    math = math, string = string, table = table, tostring = tostring, pairs = pairs, ipairs = ipairs,
    os = { getenv = function() return nil end, date = os.date, time = os.time },
    wrk = { format = format },
  }
  local given = {}
  for name in pairs(env) do given[name] = true end
  local chunk = assert(loadstring(source, "=script.lua"))
  setfenv(chunk, env)
  chunk()
  local defined = {}
  for name in pairs(env) do if not given[name] then table.insert(defined, name) end end
  return env, defined
end
"""


@dataclass(frozen=True)
class WrkScript:
    globals: set[str]
    requests: list[tuple[str, str, str | None]]

    @property
    def shape(self) -> Shape:
        return [("global", (name,)) for name in sorted(self.globals)]


def _wrk(mix: Mix) -> WrkScript:
    lua = luajit21.LuaRuntime(unpack_returned_tuples=True, encoding=None)
    run = lua.eval(_SANDBOX)

    def format_request(method: bytes, path: bytes, headers: Any, body: bytes | None) -> Any:
        return (method.decode(), path.decode(), None if body is None else body.decode())

    env, defined = run(wrk_script(mix).encode(), format_request)
    build = env[b"BUILD"]
    requests = [build[index]() for index in range(1, len(mix.endpoints) + 1)]
    return WrkScript({name.decode() for name in defined.values()}, requests)


def _strings(document: Any) -> Iterator[str]:
    if isinstance(document, str):
        yield document
    elif isinstance(document, dict):
        for key, item in document.items():
            yield key
            yield from _strings(item)
    elif isinstance(document, list):
        for item in document:
            yield from _strings(item)


@_every_field
def test_any_mix_string_is_refused_or_reaches_wrk_as_data(field: Field, value: str, tmp_path: Path) -> None:
    mix = _loaded(field, value, tmp_path)
    if mix is None:
        return
    script = _wrk(mix)
    expected = _benign_shape(field, value, lambda benign: _wrk(benign).shape)
    # Globals have no order: a drawn name in place of the benign one may sort elsewhere.
    assert expected is None or script.shape == sorted(expected)
    for endpoint, (_, path, body) in zip(mix.endpoints, script.requests, strict=True):
        assert path.isascii(), path
        assert path.isprintable(), path
        if endpoint.body is not None and not isinstance(endpoint.body, str):
            assert body is not None
            json.loads(body)  # every body of a table is JSON, whatever its strings hold
    if field.sent is None:
        return
    index, part = field.sent
    _, path, body = script.requests[index]
    assert body is not None or part == "path"
    for piece in _pieces(field.prefix + value):
        if part == "path":
            assert quote(piece, safe=string.punctuation) in path
        elif isinstance(mix.endpoints[index].body, str):
            assert piece in str(body)
        else:
            assert any(piece in text for text in _strings(json.loads(str(body))))


def test_k6_itself_reads_the_issues_payload_in_every_free_text_field_as_data(tmp_path: Path) -> None:
    document = _base()
    document["name"] = PAYLOAD
    page, write = document["endpoint"]
    page["kind"] = PAYLOAD
    page["cursor"]["field"] = PAYLOAD
    write["body"] = {PAYLOAD: PAYLOAD, "tags": [PAYLOAD]}
    write["check_json"] = {PAYLOAD: PAYLOAD}
    document["vars"]["word"]["list"] = [PAYLOAD]
    (tmp_path / "mix.toml").write_text(tomli_w.dumps(document), encoding="utf-8")
    script = tmp_path / "script.js"
    script.write_text(k6_script(load_mix(str(tmp_path / "mix.toml")), rate=60, duration_s=5))
    # `k6 inspect` runs the script's init code, where the payload would have read /etc/hostname.
    inspected = subprocess.run(
        [k6_binary(), "inspect", str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert inspected.returncode == 0, inspected.stderr
    scenarios = json.loads(inspected.stdout)["scenarios"]
    assert sorted(scenarios) == ["page", "write"]
    assert scenarios["page"]["tags"] == {"endpoint": "page", "kind": PAYLOAD}
