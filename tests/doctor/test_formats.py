"""Text as ruff prints it, JSON with the chain, and SARIF valid against the 2.1.0 schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from tenk.doctor import diagnose
from tenk.doctor.formats import FORMATS
from tests.doctor.expectations import FIXTURES, run

APP = "import time\nfrom fastapi import FastAPI\napp = FastAPI()\n@app.get('/')\nasync def root():\n    time.sleep(1)\n"

SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())


def test_sarif_is_valid_and_carries_the_call_chain_as_a_code_flow() -> None:
    report = run("helpers_chain")
    document = json.loads(FORMATS["sarif"](report, FIXTURES))
    jsonschema.validate(document, SARIF_SCHEMA)
    result = next(r for r in document["runs"][0]["results"] if "psycopg2.connect" in r["message"]["text"])
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    uris = [step["location"]["physicalLocation"]["artifactLocation"]["uri"] for step in flow]
    assert uris == [
        "helpers_chain/shop/routes.py",
        "helpers_chain/shop/routes.py",
        "helpers_chain/shop/service.py",
        "helpers_chain/shop/store.py",
    ]
    assert result["level"] == "error"


def test_sarif_of_every_fixture_is_valid() -> None:
    for directory in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        jsonschema.validate(json.loads(FORMATS["sarif"](run(directory.name), FIXTURES)), SARIF_SCHEMA)


def test_json_gives_each_finding_its_chain_study_and_fix() -> None:
    document = json.loads(FORMATS["json"](run("tasks_per_request"), FIXTURES))
    finding = next(f for f in document["findings"] if f["rule"] == "per-request-client")
    assert finding["path"] == "tasks_per_request/app.py"
    # From the route that declares the dependency, through its `Depends(...)`, into the dependency.
    assert [step["function"] for step in finding["chain"]] == ["list_tasks", "list_tasks", "get_db_connection"]
    assert finding["study"]["seed"] == "003_15a8e742bae16626.txt"
    assert "900 RPS" in finding["study"]["figure"]
    assert finding["fix"].startswith("-")
    # Notes (the compose file's access log) are advice: listed, and counted apart from the findings.
    costs = [f for f in document["findings"] if f["severity"] != "note"]
    assert document["summary"]["findings"] == len(costs)
    assert document["summary"]["notes"] == len(document["findings"]) - len(costs) == 1


def test_text_reads_like_ruff_with_location_rule_code_and_fix() -> None:
    text = FORMATS["text"](run("product_api_legacy"), FIXTURES)
    first = text.splitlines()[0]
    assert first.startswith("product_api_legacy/app.py:14:12: per-request-client [warning] ")
    assert "= via:" in text
    assert "= tenk counted: TCP connections made to Redis over 10 requests: 10 with the pattern, 1 with the fix" in text
    assert "= study 003 claimed: a psycopg connection per request" in text
    assert text.rstrip().splitlines()[-1].startswith("Found 4 finding(s) (3 error(s), 1 warning(s)) in")


def test_text_escapes_control_characters_from_the_analysed_source(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "import time\nfrom fastapi import FastAPI\napp = FastAPI()\n"
        "@app.get('/')\nasync def root():\n    time.sleep(1); x = '\x1b]0;owned\x07\x1b[2J'\n"
    )
    text = FORMATS["text"](diagnose(str(tmp_path)), tmp_path)
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\\x1b[2J" in text


def test_a_file_nested_past_the_parser_limits_is_skipped_not_fatal(tmp_path: Path) -> None:
    # A long chain of `+` is one nested BinOp per term: past the parser's recursion limit.
    (tmp_path / "deep.py").write_text("x = 1" + "+1" * 300_000 + "\n")
    (tmp_path / "app.py").write_text(
        "import time\nfrom fastapi import FastAPI\napp = FastAPI()\n"
        "@app.get('/')\nasync def root():\n    time.sleep(1)\n"
    )
    assert [f.rule for f in diagnose(str(tmp_path)).findings] == ["blocking-call"]


def test_every_format_says_which_versions_were_read_and_which_assumed(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "requirements.txt").write_text("fastapi==0.110.0\npydantic>=2.5,<3\n")
    report = diagnose(str(tmp_path))
    text = FORMATS["text"](report, tmp_path).splitlines()
    assert text[-2] == (
        "versions: read fastapi 0.110.0 (requirements.txt); assumed pydantic 2.14.4 (the newest tenk measured "
        "that requirements.txt's `pydantic>=2.5,<3` allows)"
    )
    document = json.loads(FORMATS["json"](report, tmp_path))
    assert [(v["package"], v["version"], v["assumed"]) for v in document["versions"]] == [
        ("fastapi", "0.110.0", False),
        ("pydantic", "2.14.4", True),
    ]
    sarif = json.loads(FORMATS["sarif"](report, tmp_path))
    jsonschema.validate(sarif, SARIF_SCHEMA)
    assert sarif["runs"][0]["properties"]["versions"] == document["versions"]


def test_a_finding_quotes_what_tenk_counted_on_the_apps_versions_before_the_studys_figure() -> None:
    document = json.loads(FORMATS["json"](run("validation_v1"), FIXTURES))
    cost = document["findings"][0]["cost"]
    assert (cost["counted"]["pattern"], cost["counted"]["fix"]) == (1, 0)
    assert "pydantic 1.10.26" in cost["counted"]["on"]
    text = FORMATS["text"](run("server_config"), FIXTURES)
    block = text.split("access-log [note]")[1].split("\n\n")[0]
    labels = [line.split(":")[0].strip(" =") for line in block.splitlines() if line.strip().startswith("= ")]
    assert labels[labels.index("tenk counted") :][:4] == [
        "tenk counted",
        "the lab measured",
        "the lab measured",
        "study 003 claimed",
    ]
    assert "1.80x [1.45-2.50] capacity, the study's 3.1x refuted" in block


def test_sarif_marks_the_app_wide_note_note_and_costs_at_a_line_warning_or_error() -> None:
    document = json.loads(FORMATS["sarif"](run("sync_routes"), FIXTURES))
    jsonschema.validate(document, SARIF_SCHEMA)
    levels = {(r["ruleId"], r["level"]) for r in document["runs"][0]["results"]}
    assert levels == {("sync-route", "note"), ("per-request-client", "warning"), ("thread-hop", "warning")}
    note = next(r for r in document["runs"][0]["results"] if r["ruleId"] == "sync-route")
    assert len(note["relatedLocations"]) == 4
    defaults = {r["id"]: r["defaultConfiguration"]["level"] for r in document["runs"][0]["tool"]["driver"]["rules"]}
    # The app-wide rules (the server's configuration, sync routes) are notes by default; the others cost
    # something at a line, and are notes only where no served request reaches it.
    assert {rule for rule, level in defaults.items() if level == "note"} == {
        "sync-route",
        "access-log",
        "h11-parser",
        "no-uvloop",
        "one-worker",
    }


def test_sarif_marks_a_pattern_no_served_request_reaches_note_once_for_the_app() -> None:
    document = json.loads(FORMATS["sarif"](run("unserved"), FIXTURES))
    jsonschema.validate(document, SARIF_SCHEMA)
    results = document["runs"][0]["results"]
    timeouts = [(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["level"]) for r in results]
    timeouts = [place for place, r in zip(timeouts, results, strict=True) if r["ruleId"] == "no-timeout"]
    # The routes' two calls are warnings; the lifespan's, the SDK's and the CLI's are one note, at the first.
    assert timeouts == [(17, "note"), (26, "warning"), (33, "warning")]
    note = next(r for r in results if r["ruleId"] == "no-timeout" and r["level"] == "note")
    assert len(note["relatedLocations"]) == 4
    assert note["message"]["text"].startswith("5 places in the app, reported once")


def test_text_lists_notes_under_their_own_heading_and_counts_them_apart() -> None:
    text = FORMATS["text"](run("unserved"), FIXTURES)
    costs, notes = text.split("Notes (advice about the app, not a cost at a line):")
    assert "no-timeout [warning]" in costs
    assert "[note]" not in costs
    assert "no-timeout [note] 5 places in the app" in notes
    assert "blocking-call [note]" in notes
    assert "and 1 more (`--format json` lists them)" in notes
    assert text.rstrip().splitlines()[-1].startswith("Found 3 finding(s) (0 error(s), 3 warning(s)) and 3 note(s)")
