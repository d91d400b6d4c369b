"""Mixes: parsed with precise errors, and turned into k6 scripts whose scenario rates keep the weights."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tenk.lab.cli import PRESET_DIR
from tenk.lab.definition.mixes import builtin_mixes, load_mix
from tenk.lab.driving.k6 import k6_binary, segment_args
from tenk.lab.driving.k6script import k6_script, plan
from tenk.lab.driving.wrk import wrk_script, wrk_timeout_s
from tenk.lab.errors import ConfigError


def test_the_builtin_mixes_are_there_and_the_realistic_one_has_every_kind() -> None:
    assert {"realistic", "ping", "product", "tasks-list", "search", "ingest", "quotes"} <= set(builtin_mixes())
    realistic = load_mix("realistic")
    assert {e.kind for e in realistic.endpoints} == {"light", "cached", "db", "write", "external", "search", "ingest"}
    assert sum(e.share for e in realistic.endpoints) == pytest.approx(1.0)
    assert realistic.needs_upstream
    assert not load_mix("product").needs_upstream


def test_each_endpoint_gets_a_constant_arrival_rate_scenario_at_rate_times_weight() -> None:
    mix = load_mix("realistic")
    script = k6_script(mix, rate=300, duration_s=10, slo_ms=100)
    options = json.loads(script.split("export const options = ", 1)[1].split(";\n", 1)[0])
    scenarios = options["scenarios"]
    assert set(scenarios) == {e.name for e in mix.endpoints}
    for endpoint in mix.endpoints:
        scenario = scenarios[endpoint.name]
        assert scenario["executor"] == "constant-arrival-rate"
        assert scenario["rate"] / 60 == pytest.approx(300 * endpoint.share, abs=1 / 60)
        assert scenario["tags"] == {"endpoint": endpoint.name, "kind": endpoint.kind}
        assert f"http_reqs{{endpoint:{endpoint.name}}}" in options["thresholds"]
    # The VU pool covers the worst expected latency: the quote endpoint's 1 s at 21 req/s.
    quote = next(p for p in plan(mix, 300, 100) if p.endpoint == "quote")
    assert quote.pre_allocated_vus >= 21
    assert quote.max_vus >= quote.pre_allocated_vus
    assert "handleSummary" in script


def test_generated_scripts_are_valid_k6(tmp_path: Path) -> None:
    for name in builtin_mixes():
        path = tmp_path / f"{name}.js"
        path.write_text(k6_script(load_mix(name), rate=100, duration_s=5))
        inspected = subprocess.run(
            [k6_binary(), "inspect", str(path)], capture_output=True, text=True, timeout=30, check=False
        )
        assert inspected.returncode == 0, inspected.stderr
        assert name in path.read_text()


def test_placeholders_become_per_request_values() -> None:
    script = k6_script(load_mix("realistic"), rate=100, duration_s=5)
    assert 'BASE + "/products/" + encodeURIComponent(String(v_hot_product))' in script
    assert "const v_hot_product = between(1, 1000);" in script
    assert '"event_id": v_uuid' in script  # a lone placeholder keeps its own type
    assert 'if (cursor_tasks_page !== null) url += "&after="' in script
    lua = wrk_script(load_mix("realistic"))
    assert "urlencode(tostring(math.random(1, 1000)))" in lua
    assert "[201] = true" in lua
    assert "[202] = true" in lua


def test_an_endpoint_sends_its_own_headers_beside_the_labs(tmp_path: Path) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(
        """name = "close"
[[endpoint]]
name = "last"
path = "/ping"
weight = 1
headers = { Connection = "close" }
[[endpoint]]
name = "write"
method = "POST"
path = "/tasks"
weight = 4
body = { title = "t" }
"""
    )
    mix = load_mix(str(path))
    script = k6_script(mix, rate=100, duration_s=5)
    assert 'const HEADERS_last = Object.assign({}, PLAIN_HEADERS, {"Connection": "close"});' in script
    assert "headers: HEADERS_last" in script
    assert "headers: JSON_HEADERS" in script  # an endpoint without its own keeps the lab's
    (tmp_path / "close.js").write_text(script)
    inspected = subprocess.run(
        [k6_binary(), "inspect", str(tmp_path / "close.js")], capture_output=True, text=True, timeout=30, check=False
    )
    assert inspected.returncode == 0, inspected.stderr
    lua = wrk_script(mix)
    assert 'with_headers(PLAIN_HEADERS, {["Connection"] = "close"})' in lua


def test_value_lists_are_built_once_for_all_vus_not_once_per_vu() -> None:
    # 10,000 queries in every VU's heap made each of Go's collections mark hundreds of MB on k6's one core.
    script = k6_script(load_mix("search"), rate=2000, duration_s=5)
    assert 'const VALUES_query = new SharedArray("query", () => ["' in script
    assert "pick(VALUES_query)" in script


def test_wrk_waits_as_long_as_the_mixs_longest_timeout() -> None:
    assert wrk_timeout_s(load_mix("realistic")) == 10  # every endpoint's default
    assert wrk_timeout_s(load_mix(str(PRESET_DIR / "mixes" / "ladder-study.toml"))) == 120


def test_a_variant_mix_keeps_its_bases_weights_less_what_it_leaves_out() -> None:
    realistic = load_mix("realistic")
    study = load_mix(str(PRESET_DIR / "mixes" / "ladder-study.toml"))
    kept = [endpoint for endpoint in realistic.endpoints if endpoint.name != "event"]
    assert [endpoint.name for endpoint in study.endpoints] == [endpoint.name for endpoint in kept]
    assert sum(endpoint.share for endpoint in study.endpoints) == pytest.approx(1.0)
    for mine, theirs in zip(study.endpoints, kept, strict=True):
        assert mine.share / study.endpoints[0].share == pytest.approx(theirs.share / kept[0].share)
        assert (mine.path, mine.body, mine.timeout_ms) == (theirs.path, theirs.body, 120_000)
    assert study.vars == realistic.vars
    assert not study.needs_ingest


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ('based_on = "realistic"\nleave_out = ["evnt"]\n', "leave_out", "has no endpoint 'evnt'"),
        ('based_on = "ping"\nleave_out = ["ping"]\n', "leave_out", "leaves out every endpoint"),
        ('based_on = "nowhere"\n', "based_on", "no such mix file"),
        ('based_on = "variant.toml"\n', "based_on", "is itself based on another mix"),
        ('based_on = "ping"\n[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\n', "endpoint", "as they are"),
        ('leave_out = ["a"]\n[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\n', "leave_out", "only a mix"),
        ('based_on = "ping"\ntimeout_ms = 0\n', "timeout_ms", "expected an integer >= 1"),
    ],
)
def test_a_malformed_variant_mix_names_its_key(tmp_path: Path, text: str, key: str, message: str) -> None:
    path = tmp_path / "variant.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_mix(str(path))
    assert caught.value.key == key
    assert message in str(caught.value)


def test_segments_split_the_load_into_k6_execution_segments() -> None:
    assert segment_args("2/3") == ["--execution-segment", "1/3:2/3", "--execution-segment-sequence", "0,1/3,2/3,1"]


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ('[[endpoint]]\nname = "a"\npath = "/x/{nope}"\nweight = 1\n', 3, "endpoint[1].path"),
        ('[[endpoint]]\nname = "a"\npath = "x"\nweight = 1\n', 3, "endpoint[1].path"),
        ('[[endpoint]]\nname = "a"\npath = "/x"\nweight = 0\n', 4, "endpoint[1].weight"),
        ('[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\nexpect = [99]\n', 5, "endpoint[1].expect"),
        ('[vars.id]\nrange = [5, 1]\n[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\n', 2, "vars.id.range"),
        ('[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\nmethod = "FETCH"\n', 5, "endpoint[1].method"),
        (
            '[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\ncursor = { param = "p", feld = "x" }\n',
            5,
            "endpoint.cursor[1].feld",
        ),
        ('[[endpoint]]\nname = "a"\npath = "/x"\nweight = "heavy"\n', 4, "endpoint[1].weight"),
        ('[[endpoint]]\nname = "a"\npath = "/x"\nweight = inf\n', 4, "endpoint[1].weight"),
        ('[[endpoint]]\nname = "a"\npath = "/x y"\nweight = 1\n', 3, "endpoint[1].path"),
        ('[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\nbody = { at = 1979-05-27 }\n', 5, "endpoint[1].body"),
        ('[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\nbody = [1, nan]\n', 5, "endpoint[1].body"),
        (
            '[[endpoint]]\nname = "a"\npath = "/x"\nweight = 1\ncursor = { param = "a&b=", field = "x" }\n',
            5,
            "endpoint.cursor[1].param",
        ),
    ],
)
def test_malformed_mixes_name_file_line_and_key(tmp_path: Path, text: str, line: int, key: str) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_mix(str(path))
    assert (caught.value.path, caught.value.line, caught.value.key) == (path, line, key)
