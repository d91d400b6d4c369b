"""Weighted request mixes, read from TOML. Built-ins live in `tenk/lab/mixes/`; `tenk lab mixes` lists them.

A mix names its value generators under `[vars.NAME]` (`range = [lo, hi]` or `list = [...]`) and its
endpoints as `[[endpoint]]` tables. Paths and bodies use `{NAME}` placeholders, filled per request
from a generator or one of the built-ins: `{uid}` (unique within the run), `{uuid}`, `{now}` (RFC 3339),
`{vu}`, `{iter}`.

A mix may also be another's variant: `based_on = "realistic"` takes its generators and endpoints,
`leave_out = ["event"]` drops endpoints by name (the rest keep their relative weights), and a top-level
`timeout_ms` sets every endpoint's. A preset that differs from a built-in mix only so says it once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tenk.lab.definition._toml import Where, load
from tenk.lab.definition.fields import EndpointTable, explain
from tenk.lab.errors import ConfigError

BUILTIN_DIR = Path(__file__).parents[1] / "mixes"
BUILTIN_PLACEHOLDERS = frozenset({"uid", "uuid", "now", "vu", "iter"})
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholder_value(name: str, variables: dict[str, Var], builtins: dict[str, str], between: str) -> str:
    """A generator-language expression for placeholder `name`: the builtin's (`builtins`, one per name in
    BUILTIN_PLACEHOLDERS), a range variable's `between` (formatted with {low} and {high}), or a pick."""
    if name in builtins:
        return builtins[name]
    var = variables[name]
    return between.format(low=var.low, high=var.high) if var.is_range else f"pick(VALUES_{var.name})"


def template_pieces(text: str, literal: Callable[[str], str], placeholder: Callable[[str], str]) -> list[str]:
    """`text` as a generator-language expression's parts: `literal` quotes the text between placeholders,
    `placeholder` gives each `{name}`'s per-request value. The caller joins them with its concatenation."""
    pieces: list[str] = []
    last = 0
    for match in PLACEHOLDER.finditer(text):
        if match.start() > last:
            pieces.append(literal(text[last : match.start()]))
        pieces.append(placeholder(match.group(1)))
        last = match.end()
    if last < len(text) or not pieces:
        pieces.append(literal(text[last:]))
    return pieces


# A generator becomes `VALUES_NAME` in the scripts, so its name is an identifier, matched whole
# (`$` lets a trailing newline by).
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Var:
    name: str
    low: int = 0
    high: int = 0
    values: tuple[str | int, ...] = ()

    @property
    def is_range(self) -> bool:
        return not self.values


@dataclass(frozen=True)
class Cursor:
    """Follow a keyset cursor: send `param=<value of field>` from this VU's previous response."""

    param: str
    field: str


@dataclass(frozen=True)
class Endpoint:
    name: str
    kind: str
    method: str
    path: str
    share: float  # normalised weight: the shares of a mix sum to 1
    expect: tuple[int, ...]
    auth: bool
    body: Any
    cursor: Cursor | None
    external: bool
    timeout_ms: int
    worst_latency_ms: int
    # JSON field -> the value (a template) the answer must hold there; k6 counts a mismatch as an error.
    check_json: dict[str, str] = field(default_factory=dict)
    # Headers sent besides the lab's own (Content-Type, Authorization), which they may replace.
    headers: dict[str, str] = field(default_factory=dict)

    def placeholders(self) -> list[str]:
        found = PLACEHOLDER.findall(self.path)
        found += _body_placeholders(self.body)
        found += [name for value in self.check_json.values() for name in PLACEHOLDER.findall(value)]
        return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Mix:
    name: str
    description: str
    source: Path
    vars: dict[str, Var]
    endpoints: tuple[Endpoint, ...]

    @property
    def needs_upstream(self) -> bool:
        return any(endpoint.external for endpoint in self.endpoints)

    @property
    def needs_ingest(self) -> bool:
        return any(endpoint.kind == "ingest" for endpoint in self.endpoints)


def _body_placeholders(body: Any) -> list[str]:
    if isinstance(body, str):
        return PLACEHOLDER.findall(body)
    if isinstance(body, dict):
        return [p for value in body.values() for p in _body_placeholders(value)]
    if isinstance(body, list):
        return [p for value in body for p in _body_placeholders(value)]
    return []


def builtin_mixes() -> dict[str, Path]:
    return {path.stem: path for path in sorted(BUILTIN_DIR.glob("*.toml"))}


def resolve_mix(name_or_path: str, relative_to: Path | None = None) -> Path:
    """A built-in mix name, or a path (relative to the ladder file that names it)."""
    builtins = builtin_mixes()
    if name_or_path in builtins:
        return builtins[name_or_path]
    path = Path(name_or_path)
    if not path.is_absolute() and relative_to is not None and _is_file(relative_to / path):
        path = relative_to / path
    return path


def _is_file(path: Path) -> bool:
    """Whether `path` names a file: a directory names no mix, and nor does a name the system refuses
    (too long, or holding a NUL), which `Path.exists` would raise on."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def load_mix(name_or_path: str, relative_to: Path | None = None) -> Mix:
    path = resolve_mix(name_or_path, relative_to)
    if not _is_file(path):
        known = ", ".join(builtin_mixes())
        raise ConfigError(path, None, "", f"no such mix file, and not a built-in mix ({known})")
    data, text = load(path)
    root = Where(path, text)
    root.check_keys(data, ("name", "description", "vars", "endpoint", "based_on", "leave_out", "timeout_ms"))
    name = root.string(data, "name", path.stem)
    description = root.string(data, "description", "-")
    if "based_on" in data:
        endpoints, variables = _variant(root, data, path)
    else:
        endpoints, variables = _own_endpoints(root, data, path, text)
    if "timeout_ms" in data:
        timeout_ms = root.integer(data, "timeout_ms", minimum=1)
        endpoints = tuple(replace(endpoint, timeout_ms=timeout_ms) for endpoint in endpoints)
    return Mix(name, description, path, variables, endpoints)


Parts = tuple[tuple[Endpoint, ...], dict[str, Var]]


def _own_endpoints(root: Where, data: dict[str, Any], path: Path, text: str) -> Parts:
    variables = _vars(root, data)
    raw = data.get("endpoint")
    if not isinstance(raw, list) or not raw:
        raise root.error("endpoint", "a mix needs at least one [[endpoint]] table (or `based_on` another mix)")
    if "leave_out" in data:
        raise root.error("leave_out", "only a mix `based_on` another leaves endpoints out")
    parsed = [_endpoint(Where(path, text, "endpoint", i), item, variables) for i, item in enumerate(raw)]
    total = sum(weight for _, weight in parsed)
    names = [endpoint.name for endpoint, _ in parsed]
    for i, endpoint_name in enumerate(names):
        if names.index(endpoint_name) != i:
            raise Where(path, text, "endpoint", i).error("name", f"{endpoint_name!r} is used twice")
    return tuple(replace(endpoint, share=weight / total) for endpoint, weight in parsed), variables


def _variant(root: Where, data: dict[str, Any], path: Path) -> Parts:
    """The endpoints and generators of the mix named by `based_on`, less those `leave_out` names."""
    for key in ("endpoint", "vars"):
        if key in data:
            raise root.error(key, "a mix `based_on` another takes its endpoints and generators as they are")
    base_name = root.string(data, "based_on")
    base_path = resolve_mix(base_name, path.parent)
    if not _is_file(base_path):
        raise root.error("based_on", f"no such mix file, and not a built-in mix ({', '.join(builtin_mixes())})")
    try:
        base_data = load(base_path)[0]
    except ConfigError as exc:
        raise root.error("based_on", str(exc)) from None
    if "based_on" in base_data:
        # One level only: no chains to follow, and no cycle to guard against.
        raise root.error("based_on", f"{base_name!r} is itself based on another mix; name a mix with endpoints")
    base = load_mix(base_name, path.parent)
    leave_out = data.get("leave_out", [])
    if not isinstance(leave_out, list) or not all(isinstance(item, str) for item in leave_out):
        raise root.error("leave_out", "expected a list of endpoint names")
    known = [endpoint.name for endpoint in base.endpoints]
    for endpoint_name in leave_out:
        if endpoint_name not in known:
            has = ", ".join(known)
            raise root.error("leave_out", f"{base.name!r} has no endpoint {endpoint_name!r} (it has {has})")
    kept = [endpoint for endpoint in base.endpoints if endpoint.name not in leave_out]
    if not kept:
        raise root.error("leave_out", f"leaves out every endpoint of {base.name!r}")
    total = sum(endpoint.share for endpoint in kept)
    return tuple(replace(endpoint, share=endpoint.share / total) for endpoint in kept), base.vars


def _vars(root: Where, data: dict[str, Any]) -> dict[str, Var]:
    table = root.table_of(data, "vars")
    variables: dict[str, Var] = {}
    for name, spec in table.items():
        where = root.sub(f"vars.{name}")
        if not _NAME.fullmatch(name) or name in BUILTIN_PLACEHOLDERS:
            raise root.sub("vars").error(name, "a generator name must be an identifier, not a built-in")
        if not isinstance(spec, dict):
            raise root.sub("vars").error(name, "expected a table with `range = [lo, hi]` or `list = [...]`")
        where.check_keys(spec, ("range", "list"))
        if "range" in spec:
            bounds = spec["range"]
            if (
                not isinstance(bounds, list)
                or len(bounds) != 2
                or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
                or bounds[0] > bounds[1]
            ):
                raise where.error("range", f"expected [low, high] integers with low <= high, got {bounds!r}")
            variables[name] = Var(name, low=bounds[0], high=bounds[1])
        elif "list" in spec:
            values = spec["list"]
            if not isinstance(values, list) or not values or not all(isinstance(v, str | int) for v in values):
                raise where.error("list", "expected a non-empty list of strings or integers")
            variables[name] = Var(name, values=tuple(values))
        else:
            raise root.sub("vars").error(name, "expected `range = [lo, hi]` or `list = [...]`")
    return variables


def _endpoint(where: Where, item: Any, variables: dict[str, Var]) -> tuple[Endpoint, float]:
    if not isinstance(item, dict):
        raise where.error("", "expected a table")
    where.check_keys(item, EndpointTable.model_fields)  # first, for its "did you mean" hint
    try:
        table = EndpointTable.model_validate(item)
    except ValidationError as exc:
        keys, message = explain(exc)
        place = where.sub(keys[0]) if len(keys) > 1 else where
        raise place.error(keys[-1], message) from None
    path = table.path
    cursor = Cursor(table.cursor.param, table.cursor.field) if table.cursor is not None else None
    weight = float(table.weight)
    endpoint = Endpoint(
        name=table.name,
        kind=table.kind,
        method=table.method,
        path=path,
        share=weight,
        expect=tuple(table.expect),
        auth=table.auth,
        body=table.body,
        cursor=cursor,
        external=table.external,
        timeout_ms=table.timeout_ms,
        worst_latency_ms=table.worst_latency_ms,
        check_json={key: str(value) for key, value in (table.check_json or {}).items()},
        headers=dict(table.headers or {}),
    )
    for placeholder in endpoint.placeholders():
        if placeholder not in variables and placeholder not in BUILTIN_PLACEHOLDERS:
            key = "path" if placeholder in PLACEHOLDER.findall(path) else "body"
            if placeholder not in PLACEHOLDER.findall(path) + _body_placeholders(table.body):
                key = "check_json"
            known = ", ".join([*variables, *sorted(BUILTIN_PLACEHOLDERS)])
            raise where.error(key, f"unknown placeholder {{{placeholder}}} (known: {known})")
    return endpoint, weight
