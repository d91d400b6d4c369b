"""The keys a ladder's `[defaults]` and `[[rung]]` tables, and a mix's `[[endpoint]]` tables, may set,
as pydantic models.

`extra="forbid"` refuses a misspelt key; strict types refuse `workers = "two"`. Validation errors
are turned into the lab's `file:line: key: message` errors by `Where.invalid`, which maps each
error's location to its line (tomllib gives no positions; `_tomlpos` finds them).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

TARGET_PATTERN = r"^(tenk|baseline:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][\w.]*:[A-Za-z_][\w.]*)$"
CPUS_PATTERN = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"
CPU_BUDGET_PATTERN = r"^(auto|none|[1-9]\d*m|\d+(\.\d+)?)$"


class RungFields(BaseModel):
    """Every key is optional: a rung sets only what it changes."""

    # TOML reads `inf` and `nan` as floats: neither is a rate, a duration or a weight.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    target: Annotated[StrictStr, Field(pattern=TARGET_PATTERN)] | None = None
    factory: StrictBool | None = None
    server: Literal["granian", "uvicorn", "gunicorn"] | None = None
    # An app that is not served by one of those: its own command line, `{port}` and `{workers}` filled in.
    command: Annotated[list[Annotated[StrictStr, Field(min_length=1)]], Field(min_length=1)] | None = None
    workers: Annotated[StrictInt, Field(ge=1)] | None = None
    apis: Annotated[StrictInt, Field(ge=1)] | None = None
    loop: Literal["asyncio", "uvloop"] | None = None
    http: Literal["h11", "httptools"] | None = None
    access_log: StrictBool | None = None
    # TOML lets `cpus = 0` mean "0"; both spellings are accepted.
    cpus: Annotated[StrictStr, Field(pattern=CPUS_PATTERN)] | Annotated[StrictInt, Field(ge=0)] | None = None
    # Millicores as Kubernetes writes them ("300m", "1.5"), "auto", or "none".
    cpu_budget: Annotated[StrictStr, Field(pattern=CPU_BUDGET_PATTERN)] | None = None
    ingest_workers: Annotated[StrictInt, Field(ge=0)] | None = None
    pass_if_backlog_stable: StrictBool | None = None
    redis_io_threads: Annotated[StrictInt, Field(ge=0, le=128)] | None = None
    mix: Annotated[StrictStr, Field(min_length=1)] | None = None
    rate: Annotated[StrictInt | StrictFloat, Field(ge=1)] | None = None
    capacity: StrictBool | None = None
    slo_p99_ms: Annotated[StrictInt | StrictFloat, Field(ge=1)] | None = None
    duration_s: Annotated[StrictInt | StrictFloat, Field(ge=1)] | None = None
    warmup_s: Annotated[StrictInt | StrictFloat, Field(ge=0)] | None = None
    engine: Literal["k6", "wrk"] | None = None
    connections: Annotated[StrictInt, Field(ge=1)] | None = None
    step_s: Annotated[StrictInt | StrictFloat, Field(ge=1)] | None = None
    capacity_budget_s: Annotated[StrictInt | StrictFloat, Field(ge=5)] | None = None
    start_rate: Annotated[StrictInt | StrictFloat, Field(ge=1)] | None = None
    max_rate: Annotated[StrictInt | StrictFloat, Field(ge=1)] | None = None
    env: dict[str, StrictStr | StrictBool | StrictInt | StrictFloat] | None = None
    upstream: dict[Literal["p50_ms", "p99_ms", "error_rate", "hang_rate"], StrictInt | StrictFloat] | None = None
    # What should set a capacity rung's ceiling: "target" (its own CPU or waiting), or "any". Not a variable
    # of what is measured: a rung's own, else [defaults]'s; the report notes a rung that misses it, and the
    # brief run of every shipped ladder (`make test-lab`) fails on it.
    expect_bound: Literal["target", "any"] | None = None


class RungTable(RungFields):
    """A `[[rung]]` table: the fields, plus its label and the multi-variable opt-in."""

    label: Annotated[StrictStr, Field(min_length=1)] | None = None
    allow_multi: StrictBool | None = None


# A mix's strings reach the k6 and wrk scripts as literals, never as code (docs/security.md). What
# becomes part of a name in a script (an endpoint's `ep_NAME`) is an identifier, and a path and a
# cursor's query parameter are what a URL carries as written.
IDENTIFIER = r"^[A-Za-z][A-Za-z0-9_]*$"
# Whitespace or a control character makes no URL path (Go's URL parser would fail each of k6's requests at
# run time): such a mix is refused as it loads.
PATH_PATTERN = r"^/[^\s\x00-\x1f\x7f-\x9f]*$"
# A cursor's query parameter is sent unencoded, so it takes the characters URLs leave as they are.
QUERY_NAME = r"^[A-Za-z0-9._~-]+$"
NonEmpty = Annotated[StrictStr, Field(min_length=1)]


class CursorTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    param: Annotated[StrictStr, Field(pattern=QUERY_NAME)]
    field: NonEmpty


class EndpointTable(BaseModel):
    """One `[[endpoint]]` of a mix. `weight` is relative; the mix turns weights into shares."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: Annotated[StrictStr, Field(pattern=IDENTIFIER)]
    kind: NonEmpty = "other"
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "GET"
    path: Annotated[StrictStr, Field(pattern=PATH_PATTERN)]
    weight: Annotated[StrictInt | StrictFloat, Field(gt=0)]
    expect: Annotated[list[Annotated[StrictInt, Field(ge=100, lt=600)]], Field(min_length=1)] = [200]
    auth: StrictBool = False
    body: Any = None
    cursor: CursorTable | None = None
    external: StrictBool = False
    timeout_ms: Annotated[StrictInt, Field(ge=1)] = 10_000
    # Request headers besides those the lab sends (Content-Type, Authorization), e.g. `{ Connection = "close" }`.
    headers: dict[Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9-]+$")], StrictStr] | None = None
    # JSON fields the answer must hold, e.g. `{ id = "{hot_product}" }`: a wrong body counts as an error.
    check_json: dict[StrictStr, StrictStr | StrictInt] | None = None
    worst_latency_ms: Annotated[StrictInt, Field(ge=1)] = 250

    @field_validator("body")
    @classmethod
    def _json_body(cls, body: Any) -> Any:
        """A body is sent as JSON: TOML's dates and times, `inf` and `nan` have no JSON spelling."""
        wrong = _not_json(body)
        if wrong is not None:
            raise ValueError(f"expected JSON values (strings, finite numbers, booleans, arrays, tables), got {wrong!r}")
        return body


def _not_json(value: Any) -> object | None:
    """The first part of a TOML value that JSON cannot carry, or None when it all can."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return next((wrong for item in value if (wrong := _not_json(item)) is not None), None)
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    return None if value is None or isinstance(value, str | int) else value


# What a key must look like, in the words the lab uses; pydantic's own wording otherwise.
_PATTERN_HINTS = {
    "target": "expected tenk, baseline:NAME or module:attr",
    "cpus": 'expected a CPU list like "0" or "0-1"',
    "cpu_budget": 'expected millicores like "300m", cores like "1.5", "auto" or "none"',
    "name": "must be an identifier (letters, digits, _)",
    "path": "must start with '/' and hold no whitespace or control character",
    "param": "must be a query parameter name (letters, digits, '.', '_', '~', '-')",
}


def explain(exc: ValidationError) -> tuple[tuple[str, ...], str]:
    """The first error of a validation as (key path, message), e.g. (("workers",), "expected an integer ...")."""
    errors = exc.errors()
    # A misspelt key also shows up as a missing one: name the misspelling. An `inf` fails an `int | float`
    # as no integer and as no finite float: the second says what is wrong.
    error = next((e for e in errors if e["type"] in ("extra_forbidden", "finite_number")), errors[0])
    path = _path(error["loc"])
    # A union (`int | float`, `str | bool | ...`) fails once per member: judge them together.
    kinds = {e["type"].split("_", 1)[0] for e in errors if _path(e["loc"]) == path}
    value: Any = error.get("input")
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        message = "required"
    elif kind == "extra_forbidden":
        message = "unknown key"
    elif path[0] == "env" and len(path) > 1:
        message = f"expected a string, number or boolean, got {value!r}"
    elif path[0] == "expect":
        message = f"expected a list of HTTP status codes, got {value!r}"
    elif kind == "greater_than":
        message = f"must be > {ctx.get('gt')}, got {value!r}"
    elif kind == "literal_error":
        choices = ", ".join(re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        message = f"expected one of {choices}, got {value!r}"
    elif kind == "string_pattern_mismatch":
        message = f"{_PATTERN_HINTS.get(path[-1], 'unexpected format')}, got {value!r}"
    elif kind == "finite_number":
        message = f"expected a finite number, got {value!r}"
    elif kind == "value_error":
        message = str(ctx.get("error", error["msg"]))
    elif kind == "greater_than_equal":
        # An int-only field fails with a bare location; an `int | float` one names the member.
        noun = "an integer" if len(error["loc"]) == len(path) and isinstance(value, int) else "a number"
        message = f"expected {noun} >= {ctx.get('ge')}, got {value!r}"
    elif "float" in kinds:
        message = f"expected a number, got {value!r}"
    elif kind.startswith("int_"):
        message = f"expected an integer, got {value!r}"
    elif kind.startswith("bool_"):
        message = f"expected true or false, got {value!r}"
    elif kind.startswith("string_"):
        message = f"expected a non-empty string, got {value!r}"
    elif kind.startswith("dict_"):
        message = f"expected a table, got {value!r}"
    else:
        message = str(error["msg"])
    return path, message


def _path(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    return tuple(part for part in loc if isinstance(part, str) and part not in _UNION_TAGS)


# Names pydantic puts in an error's location for the member of a union that failed.
_UNION_TAGS = {"int", "float", "str", "bool", "constrained-int", "constrained-str", "constrained-float", "[key]"}
