"""wrk as the closed-loop engine: a fixed set of connections, each sending its next request as soon
as the last one returns. It finds the most a server can do, but its latency hides queueing
(coordinated omission), so its percentiles are reported as closed-loop figures, never as an SLO check.

The Lua script is generated from the same mix as the k6 script: the same weights, paths and bodies.
Cursors are not followed (wrk cannot tie a response to the request that asked for it). A mix's strings
reach it as Lua string literals (`_lua_string`), never as code, as they reach k6's (docs/security.md).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import string
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from tenk.lab.definition.mixes import PLACEHOLDER, Endpoint, Mix, Var, placeholder_value, template_pieces
from tenk.lab.documents import LoadFigures
from tenk.lab.driving.generator import LoadRun, charge, generator_environment, run_measured
from tenk.lab.driving.summary import GeneratorSummary
from tenk.lab.errors import LabError


class WrkSummary(GeneratorSummary):
    """What the script's `done` writes (see `wrk_script`): wrk's counts, socket errors and latency
    percentiles, the unexpected statuses counted by the script, and those by status code."""

    engine = "wrk"

    requests: int
    duration_us: int
    unexpected: int
    connect: int
    read: int
    write: int
    timeout: int
    p50_us: int
    p95_us: int
    p99_us: int
    max_us: int
    # wrk's own average latency and bytes read, the figures the search study (002) compared.
    mean_us: int = 0
    bytes: int = 0
    by_status: dict[str, int]


def wrk_binary() -> str | None:
    return shutil.which("wrk")


_LUA_PLAIN = frozenset(range(0x20, 0x7F)) - {ord('"'), ord("\\")}


def _lua_string(text: str) -> str:
    """`text` as a Lua string literal: printable ASCII as it is, every other byte of its UTF-8 as a
    decimal escape. wrk's LuaJIT reads `\\ddd` back as the same byte; it refuses JSON's `\\uXXXX`."""
    return '"' + "".join(chr(b) if b in _LUA_PLAIN else f"\\{b:03d}" for b in text.encode()) + '"'


def _lua_literal(value: str | int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else _lua_string(value)


def _path_literal(text: str) -> str:
    """A path's text between placeholders: wrk writes it into the request line as it is, and a request
    line is ASCII, so what is not ASCII goes percent-encoded (as k6 sends it)."""
    return _lua_string(quote(text, safe=string.punctuation))


def _json_literal(text: str) -> str:
    """Text inside a JSON string of a body, escaped for JSON, then quoted for Lua."""
    return _lua_string(json.dumps(text)[1:-1])


_BUILTINS = {
    "uid": 'RUN .. "-" .. ID .. "-" .. N',
    "uuid": "uuid4()",
    "now": 'os.date("!%Y-%m-%dT%H:%M:%SZ")',
    "vu": "ID",
    "iter": "N",
}


def _lua_value(name: str, variables: dict[str, Var]) -> str:
    return placeholder_value(name, variables, _BUILTINS, "math.random({low}, {high})")


def _numeric(name: str, variables: dict[str, Var]) -> bool:
    if name in ("vu", "iter"):
        return True
    var = variables.get(name)
    return var is not None and (var.is_range or all(isinstance(v, int) for v in var.values))


def _template(
    text: str, variables: dict[str, Var], literal: Callable[[str], str] = _lua_string, escape: str = ""
) -> str:
    """A Lua string expression for `text`: `literal` quotes the text between placeholders, and each
    placeholder's per-request value goes through the Lua function `escape`, if one is named."""

    def value(name: str) -> str:
        expr = f"tostring({_lua_value(name, variables)})"
        return f"{escape}({expr})" if escape else expr

    return " .. ".join(template_pieces(text, literal, value))


def _json_body(body: Any, variables: dict[str, Var]) -> str:
    """A Lua expression that builds the body's JSON text with fresh values per request."""
    if isinstance(body, dict):
        inner = ' .. "," .. '.join(
            f"{_lua_string(json.dumps(k) + ':')} .. {_json_body(v, variables)}" for k, v in body.items()
        )
        return f'"{{" .. {inner} .. "}}"' if body else '"{}"'
    if isinstance(body, list):
        inner = ' .. "," .. '.join(_json_body(v, variables) for v in body)
        return f'"[" .. {inner} .. "]"' if body else '"[]"'
    if isinstance(body, str):
        whole = PLACEHOLDER.fullmatch(body)
        if whole and _numeric(whole.group(1), variables):
            return f"tostring({_lua_value(whole.group(1), variables)})"
        return f'"\\"" .. {_template(body, variables, _json_literal, "jsonescape")} .. "\\""'
    return _lua_string(json.dumps(body, allow_nan=False))


def _builder(endpoint: Endpoint, variables: dict[str, Var], index: int) -> str:
    path = _template(endpoint.path, variables, _path_literal, "urlencode")
    if endpoint.body is None:
        body = "nil"
    elif isinstance(endpoint.body, str):
        body = _template(endpoint.body, variables)
    else:
        body = _json_body(endpoint.body, variables)
    headers = "AUTH_HEADERS" if endpoint.auth else "JSON_HEADERS" if endpoint.body is not None else "PLAIN_HEADERS"
    if endpoint.headers:
        extra = ", ".join(f"[{_lua_string(name)}] = {_lua_string(value)}" for name, value in endpoint.headers.items())
        headers = f"with_headers({headers}, {{{extra}}})"
    return (
        f"BUILD[{index}] = function()\n"
        f"  return wrk.format({_lua_string(endpoint.method)}, {path}, {headers}, {body})\n"
        "end\n"
    )


# The parts of a wrk script that no mix changes. First, before the mix's weights and statuses, what the
# script reads from the environment and the headers its requests send.
_LUA_GLOBALS = [
    'local RUN = os.getenv("TENK_LAB_RUN_ID") or "wrk"',
    'local KEY = os.getenv("TENK_LAB_API_KEY") or ""',
    'local SUMMARY = os.getenv("TENK_LAB_SUMMARY")',
    "PLAIN_HEADERS = {}",
    'JSON_HEADERS = { ["Content-Type"] = "application/json" }',
    'AUTH_HEADERS = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. KEY }',
]
# Then the script's state and the helpers the request builders call.
_LUA_HELPERS = [
    "local threads = {}",
    "local counter = 0",
    "ID = 0",
    "N = 0",
    "BUILD = {}",
    "function pick(list) return list[math.random(1, #list)] end",
    "function with_headers(base, extra) local t = {} for k, v in pairs(base) do t[k] = v end"
    " for k, v in pairs(extra) do t[k] = v end return t end",
    "function urlencode(s) return (s:gsub('[^%w%-%._~]', function(c) return string.format('%%%02X', "
    "string.byte(c)) end)) end",
    # A value inside a body's JSON string: its quotes, backslashes and control bytes as \\u escapes.
    "function jsonescape(s) return (s:gsub('[%c\"\\\\]', function(c) return string.format('\\\\u%04x', "
    "string.byte(c)) end)) end",
    "local function h(n) local t = {} for i = 1, n do t[i] = string.format('%x', math.random(0, 15)) end"
    " return table.concat(t) end",
    "function uuid4() return h(8) .. '-' .. h(4) .. '-4' .. h(3) .. '-' .. pick({'8','9','a','b'}) .. h(3)"
    " .. '-' .. h(12) end",
]
# Last, after the builders, wrk's hooks: each thread's id, a weighted pick of a builder per request, the
# unexpected statuses counted, and at the end the summary tenk reads (`WrkSummary`).
_LUA_HOOKS = [
    "function setup(thread)",
    "  counter = counter + 1",
    "  thread:set('id', counter)",
    "  table.insert(threads, thread)",
    "end",
    "function init(args)",
    "  math.randomseed(os.time() * 1000 + (id or 0))",
    "  ID = id or 0",
    "  unexpected = 0",
    "  by_status = {}",
    "end",
    "function request()",
    "  N = N + 1",
    "  local r = math.random()",
    "  for i = 1, #CUMULATIVE do",
    "    if r <= CUMULATIVE[i] then return BUILD[i]() end",
    "  end",
    "  return BUILD[#CUMULATIVE]()",
    "end",
    "function response(status, headers, body)",
    "  if not EXPECTED[status] then",
    "    unexpected = unexpected + 1",
    "    by_status[status] = (by_status[status] or 0) + 1",
    "  end",
    "end",
    "function done(summary, latency, requests)",
    "  local bad = 0",
    "  local statuses = {}",
    "  for _, thread in ipairs(threads) do",
    "    bad = bad + (thread:get('unexpected') or 0)",
    "    for code, n in pairs(thread:get('by_status') or {}) do statuses[code] = (statuses[code] or 0) + n end",
    "  end",
    "  local parts = {}",
    "  for code, n in pairs(statuses) do table.insert(parts, string.format('\"%d\": %d', code, n)) end",
    "  local e = summary.errors",
    '  local out = string.format(\'{"requests": %d, "duration_us": %d, "unexpected": %d, \''
    ' .. \'"connect": %d, "read": %d, "write": %d, "timeout": %d, "p50_us": %d, "p95_us": %d, \''
    ' .. \'"p99_us": %d, "max_us": %d, "mean_us": %d, "bytes": %d, "by_status": {%s}}\', summary.requests,'
    " summary.duration, bad, e.connect, e.read, e.write, e.timeout, latency:percentile(50),"
    " latency:percentile(95), latency:percentile(99), latency.max, latency.mean, summary.bytes,"
    " table.concat(parts, ', '))",
    "  if SUMMARY then local f = io.open(SUMMARY, 'w') f:write(out) f:close() else print(out) end",
    "end",
]


def wrk_script(mix: Mix) -> str:
    expected = sorted({code for endpoint in mix.endpoints for code in endpoint.expect})
    cumulative = 0.0
    weights = []
    for endpoint in mix.endpoints:
        cumulative += endpoint.share
        weights.append(f"{cumulative:.6f}")
    weights[-1] = "1.0"
    lines = [
        f"-- Generated by `tenk lab` from mix {_lua_string(mix.name)}: closed-loop, same weights as the k6 script.",
        *_LUA_GLOBALS,
        f"local CUMULATIVE = {{{', '.join(weights)}}}",
        f"local EXPECTED = {{{', '.join(f'[{c}] = true' for c in expected)}}}",
        *_LUA_HELPERS,
    ]
    for var in mix.vars.values():
        if not var.is_range:
            lines.append(f"VALUES_{var.name} = {{{', '.join(_lua_literal(v) for v in var.values)}}}")
    for index, endpoint in enumerate(mix.endpoints, start=1):
        lines.append(_builder(endpoint, mix.vars, index))
    lines += _LUA_HOOKS
    return "\n".join(lines) + "\n"


def wrk_timeout_s(mix: Mix) -> int:
    """wrk has one timeout for every request: the mix's longest, in whole seconds (wrk reads no milliseconds).

    A closed loop against a server that serves one request at a time queues each request behind all the
    other connections' (the ladder study's regime): a mix says how long that may take."""
    return math.ceil(max(endpoint.timeout_ms for endpoint in mix.endpoints) / 1000)


def run_wrk(load: LoadRun) -> tuple[LoadFigures, WrkSummary]:
    """One closed-loop run over `load.connections` connections for `load.duration_s` (whole seconds: wrk
    reads no fractions); returns the figures and the script's summary. wrk has no execution segments,
    and its connections need no VU pool: `load.segment`, `load.rate` and `load.slo_ms` are k6's."""
    binary = wrk_binary()
    if binary is None:
        raise LabError("wrk is not installed (`make system-deps`, or apt-get install wrk)")
    mix, duration_s, workdir = load.mix, load.duration_s, load.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "script.lua"
    script.write_text(wrk_script(mix))
    summary_path = workdir / "wrk-summary.json"
    summary_path.unlink(missing_ok=True)
    env = generator_environment(
        os.environ, TENK_LAB_API_KEY=load.api_key, TENK_LAB_RUN_ID=load.run_id, TENK_LAB_SUMMARY=str(summary_path)
    )
    argv = [
        binary, "-t", "1", "-c", str(load.connections), "-d", f"{max(1, round(duration_s))}s",
        "--timeout", f"{wrk_timeout_s(mix)}s", "-s", str(script), load.base_url,
    ]  # fmt: skip
    code, cost = run_measured(
        argv, cpus=load.cpus, env=env, log=load.log, timeout_s=duration_s + 30, on_tick=load.on_tick
    )
    if not summary_path.exists():
        raise LabError(f"wrk exited with {code} and wrote no summary; see {load.log}")
    summary = WrkSummary.from_json(summary_path.read_text(), summary_path)
    seconds = summary.duration_us / 1e6 or duration_s
    socket_errors = summary.connect + summary.read + summary.write + summary.timeout
    errors = summary.unexpected + socket_errors
    requests = summary.requests
    figures = LoadFigures(
        engine="wrk",
        offered_rps=0.0,
        duration_s=round(seconds, 3),
        requests=requests,
        # Goodput: a fast 503 is not throughput.
        rps=round((requests - summary.unexpected) / seconds, 2),
        p50_ms=summary.p50_us / 1000,
        p95_ms=summary.p95_us / 1000,
        p99_ms=summary.p99_us / 1000,
        max_ms=summary.max_us / 1000,
        mean_ms=summary.mean_us / 1000,
        bytes_per_s=round(summary.bytes / seconds),
        errors=errors,
        error_rate=round(errors / requests, 6) if requests else 0.0,
        dropped=0,
        generator_cpu_s=0.0,
        generator_cores_used=0.0,
        generator_util=0.0,
        generator_cores=0,
        generator_bound=False,
        errors_by_reason=_reasons(summary),
    )
    charge(figures, cost)
    return figures, summary


def _reasons(summary: WrkSummary) -> dict[str, int]:
    """wrk's failures in the k6 vocabulary: each status code, timeouts, refused/other socket errors."""
    reasons = {f"status_{code}": n for code, n in summary.by_status.items() if n}
    # wrk reports connect failures without their cause; a refused connection is the usual one.
    socket_errors = {
        "timeout": summary.timeout,
        "refused": summary.connect,
        "reset": summary.read,
        "network": summary.write,
    }
    for reason, count in socket_errors.items():
        if count:
            reasons[reason] = reasons.get(reason, 0) + count
    return reasons
