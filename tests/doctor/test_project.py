"""What doctor reads: every file, by its path, with a line for each one it could not read or follow."""

from __future__ import annotations

import json
from pathlib import Path

from tenk.doctor import Report, diagnose
from tenk.doctor.formats import FORMATS
from tests.doctor.expectations import FIXTURES, run

MULTI = FIXTURES / "multi_package"
APP = "import time\nfrom fastapi import FastAPI\napp = FastAPI()\n@app.get('/')\nasync def root():\n    time.sleep(1)\n"


def _entries(report: Report) -> set[tuple[str, int, str]]:
    return {
        (entry.function.module.path.relative_to(MULTI).as_posix(), entry.function.node.lineno, entry.kind)
        for entry in report.context.entries.entries
    }


def test_files_of_one_name_in_folders_without_init_are_two_modules_both_read() -> None:
    report = run("multi_package")
    modules = {module.name: module.path.relative_to(MULTI).as_posix() for module in report.context.target.modules}
    assert modules["routers.orders"] == "routers/orders.py"
    assert modules["models.orders"] == "models/orders.py"
    assert report.files == len(list(MULTI.rglob("*.py"))) == len(modules)
    # The dependency defined in models/orders.py is reached from the router that imports it.
    assert ("blocking-call", "orders.py", 13) in {(f.rule, f.path.name, f.line) for f in report.findings}


def test_directory_and_module_app_find_the_same_entry_points() -> None:
    as_directory = diagnose(str(MULTI))
    as_app = diagnose("main:app", search_path=[str(MULTI)])
    assert _entries(as_directory) == _entries(as_app)
    assert len(_entries(as_app)) == 5
    assert as_directory.files == as_app.files
    assert {f.sort_key() for f in as_directory.findings} == {f.sort_key() for f in as_app.findings}


def test_a_package_under_a_folder_without_init_answers_to_its_own_name_too(tmp_path: Path) -> None:
    package = tmp_path / "src" / "shop"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store.py").write_text("import time\n\ndef slow():\n    time.sleep(1)\n")
    (package / "routes.py").write_text(
        "from fastapi import APIRouter\nfrom shop.store import slow\nrouter = APIRouter()\n"
        "@router.get('/')\nasync def root():\n    slow()\n"
    )
    report = diagnose(str(tmp_path))
    names = {module.name for module in report.context.target.modules}
    assert names == {"src.shop", "src.shop.store", "src.shop.routes"}
    assert [(f.rule, f.path.name, len(f.chain)) for f in report.findings] == [("blocking-call", "store.py", 2)]
    assert report.unread == ()


def _broken_app(root: Path) -> None:
    (root / "app.py").write_text(APP + "from helpers import missing\nimport generated_pb2\n")
    (root / "helpers").mkdir()
    (root / "helpers" / "ok.py").write_text("X = 1\n")
    (root / "syntax.py").write_text("def f(:\n    pass\n")
    (root / "bytes.py").write_bytes(b"name = '\xe9t\xe9'\n")
    (root / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n")
    (root / "gone.py").symlink_to(root / "nowhere.py")
    # A long chain of `+` is one nested BinOp per term: past the parser's recursion limit.
    (root / "deep.py").write_text("x = 1" + "+1" * 300_000 + "\n")


def test_every_file_not_analysed_is_reported_with_its_reason(tmp_path: Path) -> None:
    _broken_app(tmp_path)
    report = diagnose(str(tmp_path))
    reasons = {(unread.path.name, unread.line): unread.reason for unread in report.unread}
    assert reasons.keys() == {
        ("syntax.py", 1),
        ("bytes.py", None),
        ("gone.py", None),
        ("deep.py", None),
        ("app.py", 7),
    }
    assert reasons["syntax.py", 1].startswith("syntax error")
    assert reasons["bytes.py", None].startswith("not valid UTF-8")
    assert reasons["gone.py", None].startswith("cannot be read")
    assert reasons["deep.py", None] == "nested past the parser's limits"
    assert "`helpers.missing`" in reasons["app.py", 7]
    # Read and analysed: the app, the helper, and the file whose coding line says latin-1.
    assert report.files == 3
    assert [f.rule for f in report.findings] == ["blocking-call"]


def test_files_not_analysed_are_listed_in_every_format(tmp_path: Path) -> None:
    _broken_app(tmp_path)
    report = diagnose(str(tmp_path))
    text = FORMATS["text"](report, tmp_path)
    assert "syntax.py:1: not analysed: syntax error" in text
    assert "gone.py: not analysed: cannot be read" in text
    assert (
        text.rstrip()
        .splitlines()[-1]
        .startswith("Found 1 finding(s) (1 error(s), 0 warning(s)) in 3 file(s) (5 not analysed, listed")
    )
    document = json.loads(FORMATS["json"](report, tmp_path))
    assert {(u["path"], u["line"]) for u in document["unread"]} == {
        ("syntax.py", 1),
        ("bytes.py", None),
        ("gone.py", None),
        ("deep.py", None),
        ("app.py", 7),
    }
    assert (document["summary"]["files"], document["summary"]["unread"]) == (3, 5)
    sarif = json.loads(FORMATS["sarif"](report, tmp_path))
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    located = {n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes}
    assert located == {"syntax.py", "bytes.py", "gone.py", "deep.py", "app.py"}


def test_module_app_reports_an_own_import_it_cannot_follow(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "main.py").write_text(APP + "from shop import generated\nfrom shop.broken import x\n")
    (tmp_path / "shop" / "broken.py").write_text("def f(:\n")
    report = diagnose("shop.main:app", search_path=[str(tmp_path)])
    reasons = sorted((unread.path.name, unread.line, unread.reason.split(":")[0]) for unread in report.unread)
    assert reasons == [
        ("broken.py", 1, "syntax error"),
        ("main.py", 7, "imports `shop.generated`, which names no readable module on the search path"),
        ("main.py", 8, "imports `shop.broken.x`, which names no readable module on the search path"),
    ]
    assert report.files == 2
