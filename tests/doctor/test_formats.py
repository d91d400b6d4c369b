"""Text as ruff prints it, JSON with the chain, and SARIF valid against the 2.1.0 schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from tenk.doctor import diagnose
from tenk.doctor.formats import FORMATS
from tests.doctor.expectations import FIXTURES, run

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
    assert [step["function"] for step in finding["chain"]] == ["get_db_connection"]
    assert finding["study"]["seed"] == "003_15a8e742bae16626.txt"
    assert "900 RPS" in finding["study"]["figure"]
    assert finding["fix"].startswith("-")
    assert document["summary"]["findings"] == len(document["findings"])


def test_text_reads_like_ruff_with_location_rule_code_and_fix() -> None:
    text = FORMATS["text"](run("product_api_legacy"), FIXTURES)
    first = text.splitlines()[0]
    assert first.startswith("product_api_legacy/app.py:14:12: per-request-client [error] ")
    assert "= via:" in text
    assert "= measured:" in text
    assert "(000_47bb144eb86ea611.txt)" in text or "(003_15a8e742bae16626.txt)" in text
    assert text.rstrip().splitlines()[-1].startswith("Found 4 finding(s) (4 error(s), 0 warning(s))")


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
