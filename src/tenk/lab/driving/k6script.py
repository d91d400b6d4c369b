"""A k6 script from a mix: one constant-arrival-rate scenario per endpoint, so the load is open-loop
and the endpoint ratios are exact (rate = total x share), whatever the server's latency.

The script is self-contained and takes its target from the environment, so the same file runs
under `tenk lab`, a plain `k6 run`, or k6-operator on Kubernetes:
    TENK_LAB_BASE_URL   where to send requests (required)
    TENK_LAB_API_KEY    bearer key for endpoints with `auth = true`
    TENK_LAB_RUN_ID     makes `{uid}` unique across runs and generator machines
    TENK_LAB_SUMMARY    file for handleSummary's JSON; unset, the JSON goes to stdout

What a mix says reaches the script as data: every string and number as a JSON literal (`_js`), and
only identifiers (endpoint and generator names, which the mix loader checks) as parts of names.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from tenk.lab.definition.mixes import PLACEHOLDER, Endpoint, Mix, Var, placeholder_value, template_pieces

TREND_STATS = ["avg", "min", "med", "max", "p(50)", "p(90)", "p(95)", "p(99)", "p(99.9)"]
# Per-minute rates keep small shares exact: 7% of 30 req/s is 126/min, not a rounded 2/s.
TIME_UNIT_S = 60
MAX_VUS_CAP = 3000
# Each failed request is counted under one reason. Status codes outside this list count as
# `status_other`; a list keeps every reason a named sub-metric that k6's summary carries.
ERROR_STATUSES = (400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504)
NETWORK_REASONS = ("timeout", "refused", "reset", "network")
# An expected status whose JSON body did not hold what the endpoint's `check_json` names.
WRONG_BODY = "wrong_body"
ERROR_REASONS = (*(f"status_{code}" for code in ERROR_STATUSES), "status_other", *NETWORK_REASONS, WRONG_BODY)


@dataclass(frozen=True)
class ScenarioPlan:
    endpoint: str
    per_minute: int
    pre_allocated_vus: int
    max_vus: int

    @property
    def rate(self) -> float:
        return self.per_minute / TIME_UNIT_S


def plan(mix: Mix, rate: float, slo_ms: float) -> list[ScenarioPlan]:
    """How many arrivals and VUs each endpoint gets at `rate` req/s in total.

    Pre-allocated VUs cover the endpoint's worst expected latency (or the SLO, if larger) at its
    rate, so k6 never has to create VUs mid-run in a healthy step; the ceiling covers the request
    timeout, so a slow server shows up as latency, not as iterations k6 could not start.
    """
    plans = []
    for endpoint in mix.endpoints:
        per_minute = max(1, round(rate * endpoint.share * TIME_UNIT_S))
        per_second = per_minute / TIME_UNIT_S
        worst_s = max(endpoint.worst_latency_ms, slo_ms) / 1000
        pre = math.ceil(per_second * worst_s) + 2
        ceiling = max(pre, min(math.ceil(per_second * endpoint.timeout_ms / 1000), pre * 10, MAX_VUS_CAP))
        plans.append(ScenarioPlan(endpoint.name, per_minute, pre, ceiling))
    return plans


def _js(value: Any, indent: int | None = None) -> str:
    """`value` as a JavaScript literal: JSON in ASCII, so no quote, backslash or line terminator (U+2028
    and U+2029 included) ends a string early, and a non-finite number raises rather than becoming the
    identifier `NaN`. `<` and `>` are escaped too, so the script stays inert pasted into HTML (`</script>`)."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, indent=indent)
    # Outside its strings JSON has no `<` or `>`: these replacements only ever touch string contents.
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


# What every script holds whatever its mix: the imports, the error counter and the helpers the
# endpoints' functions call (after the line naming the mix, which `k6_script` writes).
_PRELUDE = [
    "import http from 'k6/http';",
    "import exec from 'k6/execution';",
    "import { Counter } from 'k6/metrics';",
    "import { SharedArray } from 'k6/data';",
    "",
    "const ERRORS = new Counter('tenk_errors');",
    f"const LISTED = new Set({_js(list(ERROR_STATUSES))});",
    "// Why a request did not succeed: its status, or for no response, what the network said.",
    "function countError(res, ok) {",
    "  if (ok[res.status]) return;",
    "  let reason = 'network';",
    "  if (res.status > 0) reason = LISTED.has(res.status) ? 'status_' + res.status : 'status_other';",
    "  else if (res.error_code === 1050 || /timeout/i.test(res.error)) reason = 'timeout';",
    "  else if (/refused/i.test(res.error)) reason = 'refused';",
    "  else if (/reset/i.test(res.error)) reason = 'reset';",
    "  ERRORS.add(1, { reason: reason });",
    "}",
    "",
    "const BASE = (__ENV.TENK_LAB_BASE_URL || 'http://127.0.0.1:8000').replace(/\\/$/, '');",
    "const RUN = __ENV.TENK_LAB_RUN_ID || 'k6';",
    "const PLAIN_HEADERS = {};",
    "const JSON_HEADERS = { 'Content-Type': 'application/json' };",
    "const AUTH_HEADERS = { 'Content-Type': 'application/json', "
    "'Authorization': 'Bearer ' + (__ENV.TENK_LAB_API_KEY || '') };",
    "",
    "function between(lo, hi) { return lo + Math.floor(Math.random() * (hi - lo + 1)); }",
    "function pick(list) { return list[Math.floor(Math.random() * list.length)]; }",
    "function hex(n) { let s = ''; for (let i = 0; i < n; i++) s += Math.floor(Math.random() * 16).toString(16);"
    " return s; }",
    "function uuid4() { return hex(8) + '-' + hex(4) + '-4' + hex(3) + '-' + "
    "'89ab'[Math.floor(Math.random() * 4)] + hex(3) + '-' + hex(12); }",
    "function uid() { return RUN + '-' + exec.vu.idInTest + '-' + exec.vu.iterationInScenario; }",
    "",
]
_HANDLE_SUMMARY = (
    "export function handleSummary(data) {\n"
    "  const out = {};\n"
    "  out[__ENV.TENK_LAB_SUMMARY || 'stdout'] = JSON.stringify(data);\n"
    "  return out;\n"
    "}\n"
)


def k6_script(mix: Mix, rate: float, duration_s: float, slo_ms: float = 100.0) -> str:
    parts = [f"// Generated by `tenk lab` from mix {_js(mix.name)} at {rate:g} req/s for {duration_s:g}s.", *_PRELUDE]
    for var in mix.vars.values():
        if not var.is_range:
            # Module scope is per VU, and a list held by every VU is marked by every one of Go's collections
            # on the generator's core: a SharedArray is built once and kept outside the VUs' heaps.
            values = _js(list(var.values))
            parts.append(f"const VALUES_{var.name} = new SharedArray({_js(var.name)}, () => {values});")
    parts.append(f"\nexport const options = {_js(_options(mix, rate, duration_s, slo_ms), indent=2)};\n")
    for endpoint in mix.endpoints:
        codes = ", ".join(str(c) for c in endpoint.expect)
        # Built once: a non-expected status counts in http_req_failed, which is our error rate.
        parts.append(f"const EXPECT_{endpoint.name} = http.expectedStatuses({codes});")
        ok = ", ".join(f"{c}: true" for c in endpoint.expect)
        parts.append(f"const OK_{endpoint.name} = {{{ok}}};")
        if endpoint.headers:
            extra = json.dumps(endpoint.headers)
            parts.append(f"const HEADERS_{endpoint.name} = Object.assign({{}}, {_lab_headers(endpoint)}, {extra});")
    parts.append("")
    for endpoint in mix.endpoints:
        parts.append(_function(endpoint, mix.vars))
    parts.append(_HANDLE_SUMMARY)
    return "\n".join(parts)


def _options(mix: Mix, rate: float, duration_s: float, slo_ms: float) -> dict[str, Any]:
    """k6's `options`: a constant-arrival-rate scenario per endpoint, and the sub-metrics the summary keeps."""
    scenarios: dict[str, Any] = {}
    thresholds: dict[str, list[str]] = {}
    for endpoint, scenario in zip(mix.endpoints, plan(mix, rate, slo_ms), strict=True):
        scenarios[endpoint.name] = {
            "executor": "constant-arrival-rate",
            "rate": scenario.per_minute,
            "timeUnit": f"{TIME_UNIT_S}s",
            "duration": f"{duration_s:g}s",
            "preAllocatedVUs": scenario.pre_allocated_vus,
            "maxVUs": scenario.max_vus,
            "exec": _fn(endpoint),
            "gracefulStop": "5s",
            "tags": {"endpoint": endpoint.name, "kind": endpoint.kind},
        }
        # Thresholds without conditions make k6 keep these sub-metrics in the summary.
        for metric in ("http_reqs", "http_req_duration", "http_req_failed"):
            thresholds[f"{metric}{{endpoint:{endpoint.name}}}"] = []
    for reason in ERROR_REASONS:
        thresholds[f"tenk_errors{{reason:{reason}}}"] = []
    return {
        "discardResponseBodies": True,
        "summaryTrendStats": TREND_STATS,
        # Fewer system tags, less generator CPU per request; `url` alone would tag every product id.
        "systemTags": ["status", "method", "name", "scenario", "expected_response", "error_code"],
        "scenarios": scenarios,
        "thresholds": thresholds,
    }


def _lab_headers(endpoint: Endpoint) -> str:
    """The headers the lab sends itself: a bearer key for `auth`, else a JSON Content-Type for a body."""
    return "AUTH_HEADERS" if endpoint.auth else "JSON_HEADERS" if endpoint.body is not None else "PLAIN_HEADERS"


def _fn(endpoint: Endpoint) -> str:
    return f"ep_{endpoint.name}"


_BUILTINS = {
    "uid": "uid()",
    "uuid": "uuid4()",
    "now": "new Date().toISOString()",
    "vu": "exec.vu.idInTest",
    "iter": "exec.vu.iterationInScenario",
}


def _value(name: str, variables: dict[str, Var]) -> str:
    return placeholder_value(name, variables, _BUILTINS, "between({low}, {high})")


def _template(text: str, values: dict[str, str], encode: bool) -> str:
    """A JS string expression for `text` with each `{name}` replaced by its per-request value."""

    def value(name: str) -> str:
        expr = f"String(v_{name})"
        return f"encodeURIComponent({expr})" if encode else expr

    return " + ".join(template_pieces(text, _js, value))


def _body(body: Any, values: dict[str, str]) -> str:
    if isinstance(body, dict):
        return "{" + ", ".join(f"{_js(k)}: {_body(v, values)}" for k, v in body.items()) + "}"
    if isinstance(body, list):
        return "[" + ", ".join(_body(v, values) for v in body) + "]"
    if isinstance(body, str):
        whole = PLACEHOLDER.fullmatch(body)
        # A lone placeholder keeps its type, so `{ id = "{product_id}" }` sends a number.
        return f"v_{whole.group(1)}" if whole else _template(body, values, encode=False)
    return _js(body)


def _function(endpoint: Endpoint, variables: dict[str, Var]) -> str:
    names = endpoint.placeholders()
    values = {name: _value(name, variables) for name in names}
    cursor = f"cursor_{endpoint.name}"
    lines = [f"export function {_fn(endpoint)}() {{"]
    lines += [f"  const v_{name} = {expr};" for name, expr in values.items()]
    lines.append(f"  let url = BASE + {_template(endpoint.path, values, encode=True)};")
    if endpoint.cursor is not None:
        joiner = "&" if "?" in endpoint.path else "?"
        prefix = _js(f"{joiner}{endpoint.cursor.param}=")
        lines.append(f"  if ({cursor} !== null) url += {prefix} + encodeURIComponent({cursor});")
    if endpoint.body is None:
        body = "null"
    elif isinstance(endpoint.body, str):
        body = _template(endpoint.body, values, encode=False)
    else:
        body = f"JSON.stringify({_body(endpoint.body, values)})"
    params = {
        "headers": f"HEADERS_{endpoint.name}" if endpoint.headers else _lab_headers(endpoint),
        "tags": _js({"name": endpoint.name}),
        "timeout": _js(f"{endpoint.timeout_ms}ms"),
        "responseCallback": f"EXPECT_{endpoint.name}",
    }
    if endpoint.cursor is not None or endpoint.check_json:
        params["responseType"] = _js("text")
    rendered = ", ".join(f"{k}: {v}" for k, v in params.items())
    call = f"http.request({_js(endpoint.method)}, url, {body}, {{ {rendered} }})"
    lines += [f"  const res = {call};", f"  countError(res, OK_{endpoint.name});"]
    if endpoint.check_json:
        checks = " && ".join(
            f"String(body[{_js(key)}]) === String({_template(value, values, encode=False)})"
            for key, value in endpoint.check_json.items()
        )
        lines += [
            f"  if (OK_{endpoint.name}[res.status]) {{",
            "    let right = false;",
            f"    try {{ const body = res.json(); right = {checks}; }} catch (e) {{ right = false; }}",
            f"    if (!right) ERRORS.add(1, {{ reason: {_js(WRONG_BODY)} }});",
            "  }",
        ]
    if endpoint.cursor is not None:
        field = _js(endpoint.cursor.field)
        lines += [
            "  try {",
            f"    const next = res.status === 200 ? res.json({field}) : null;",
            f"    {cursor} = typeof next === 'string' && next ? next : null;",
            "  } catch (e) {",
            f"    {cursor} = null;",
            "  }",
        ]
    lines.append("}\n")
    text = "\n".join(lines)
    if endpoint.cursor is not None:
        # Module scope is per VU in k6: each VU walks its own pages.
        text = f"let {cursor} = null;\n" + text
    return text
