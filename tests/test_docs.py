"""The README and the docs site are part of the product.

The README is the front door: short, with the two set-up commands, one figure made from its data file, and
links that lead somewhere. The site under docs/ builds strictly (a broken link or anchor fails it), names
every setting in the table that `tenk settings` prints, and says of the code only what the code does: its
generated parts (the results pages, the headline, every quoted figure, the hot routes, the lane's rules)
are what `make docs` would write, and the paths, make targets and layout it names exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tenk.platform import RULES
from tenk.settings_doc import env_names, markdown_table
from tools import docs_pages
from tools.results_record import META, RESULTS, Record, build

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
SETTINGS_PAGE = (DOCS / "settings.md").read_text()
PAGES = {path: path.read_text() for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]}

# [text](target) outside code: the README's relative links, which GitHub and a clone both follow.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(markdown: str) -> list[str]:
    prose = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return [target for target in _LINK.findall(prose) if not re.match(r"[a-z]+:", target)]


def _block(markdown: str, name: str) -> str:
    return markdown.split(f"<!-- {name}", 1)[1].split("-->", 1)[1].split(f"<!-- /{name} -->", 1)[0].strip()


def _code_spans(markdown: str) -> list[str]:
    """Inline code, and each line of the fenced blocks."""
    fenced = re.findall(r"```.*?```", markdown, flags=re.DOTALL)
    prose = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return re.findall(r"`([^`\n]+)`", prose) + [line for block in fenced for line in block.splitlines()]


@pytest.fixture(scope="module")
def record() -> Record:
    return build()


def test_settings_page_documents_every_setting() -> None:
    missing = [name for name in env_names() if f"`{name}`" not in SETTINGS_PAGE]
    assert not missing, f"docs/settings.md lacks {missing}; paste `tenk settings` into its table"


def test_settings_page_table_is_the_one_generated_from_the_tree() -> None:
    # Catches renamed or removed settings, and stale defaults, which the check above cannot.
    assert markdown_table() in SETTINGS_PAGE, "docs/settings.md's table is stale; paste `tenk settings` into it"


def test_readme_gives_the_two_setup_commands() -> None:
    assert "make run" in README
    assert "make test" in README


def test_readme_is_a_front_door_of_at_most_150_lines() -> None:
    assert len(README.splitlines()) <= 150, "the README is the front door; move the detail to a page under docs/"


def test_readme_links_lead_to_files_that_exist() -> None:
    links = _relative_links(README)
    assert any(link.startswith("docs/") for link in links), "the README should lead to the docs pages"
    broken = [link for link in links if not (ROOT / link.split("#", 1)[0]).exists()]
    assert not broken, f"README links to missing files: {broken}"


def test_readme_headline_is_the_newest_headline_run_at_its_budget(record: Record) -> None:
    wanted = docs_pages.headline(record, "docs/")
    assert " ".join(_block(README, "headline").split()) == " ".join(wanted.split()), (
        "the README's headline is not its data's: run `make docs`"
    )
    assert "per core" not in wanted, "the headline is a capacity at its measured budget, not a projection"
    # Its one figure: outside the headline and the code, nothing measured.
    rest = re.sub(r"```.*?```", "", README.replace(_block(README, "headline"), ""), flags=re.DOTALL)
    figures = re.findall(r"\d[\d,.]*\s*(?:req/s|requests|rows|events|ms\b|µs|x\b|%|cores?\b)", rest)
    assert not figures, f"the README quotes {figures} beside its headline; figures belong on the pages, with their data"


def test_generated_parts_of_the_docs_are_what_make_docs_writes(record: Record) -> None:
    stale = sorted(str(page.relative_to(ROOT)) for page in docs_pages.stale(record))
    assert not stale, (
        f"stale generated parts (a results page, a headline, a figure, the hot routes) in {stale}: run `make docs`"
    )


def test_every_file_under_docs_results_is_on_the_results_page() -> None:
    page = (DOCS / "results.md").read_text()
    files = [path for path in RESULTS.rglob("*") if path.is_file() and path.name != META]
    missing = [str(path.relative_to(DOCS)) for path in files if f"]({path.relative_to(DOCS).as_posix()})" not in page]
    assert not missing, f"docs/results.md links no row to {missing}: name them in their day's {META}"


def test_hot_routes_on_the_catalog_page_are_the_lanes() -> None:
    listed = set(re.findall(r"`([A-Z]+ /[^`]*)`", _block(PAGES[DOCS / "catalog.md"], "hot-routes")))
    assert listed == set(re.findall(r"`([A-Z]+ /[^`]*)`", docs_pages.hot_routes())), (
        "docs/catalog.md's hot routes are not the lane's: run `make docs`"
    )


def test_the_platform_page_lists_every_rule_the_lane_refuses_with_its_fix() -> None:
    listed = _block(PAGES[DOCS / "platform.md"], "lane-rules")
    missing = [
        key
        for key, rule in RULES.items()
        if f"- `{key}`: " not in listed or " ".join(rule.says.split()) not in " ".join(listed.split())
    ]
    assert not missing, f"docs/platform.md does not list the lane's rules {missing}: run `make docs`"


def test_paths_the_docs_name_exist() -> None:
    # A whole code span that is a path of the repository (`tests/catalog/test_invalidation.py`, with
    # `::test_name` or not): what a page offers as the proof of what it says. `src/` beyond `src/tenk/` is
    # a user's project in an example.
    repository_path = re.compile(r"((?:tests|src/tenk|packages|benchmarks|harness|tools|deploy)/[\w./-]+)(?:::(\w+))?")
    wrong = []
    for page, text in PAGES.items():
        for span in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL)):
            if match := repository_path.fullmatch(span):
                path, test = ROOT / match[1], match[2]
                if not path.exists() or (test and not re.search(rf"(def|class) {test}\b", path.read_text())):
                    wrong.append(f"{page.name}: {span}")
    assert not wrong, f"pages name paths or tests that do not exist: {wrong}"


def test_make_targets_the_docs_name_exist() -> None:
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE))
    named = {
        (page.name, target)
        for page, text in PAGES.items()
        for span in _code_spans(text)
        for target in re.findall(r"(?:^|[\s(;&|])make ([a-z][\w-]*)", span)
    }
    wrong = sorted(f"{page}: make {target}" for page, target in named if target not in targets)
    assert not wrong, f"pages name make targets the Makefile has not: {wrong}"


def _layout_names(block: str) -> list[Path]:
    """The paths a layout block names: a line's leading names, modules and folders ("auth.py,
    request_body.py", "catalog/  tasks/"), each below the last folder named less indented. A line
    indented past the names' columns continues a description."""
    names: list[Path] = []
    parents: list[tuple[int, Path]] = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent > 8:
            continue
        parents = [(depth, path) for depth, path in parents if depth < indent]
        base = parents[-1][1] if parents else Path()
        for token in re.split(r"[,\s]+", line.strip()):
            if not re.fullmatch(r"[\w-]+(?:/[\w-]+)*(?:\.py|/)", token):
                break
            names.append(base / token)
            if token.endswith("/"):
                parents.append((indent, base / token))
    return names


def test_the_layout_on_the_contributing_page_is_the_tree() -> None:
    block = PAGES[DOCS / "contributing.md"].split("## Layout", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    names = _layout_names(block)
    missing = [str(name) for name in names if not (ROOT / name).exists()]
    assert not missing, f"docs/contributing.md's layout names what the tree has not: {missing}"
    # Every package of tenk's top level, and of the platform and the lab, is on it.
    named = {ROOT / name for name in names}
    packages = [
        path
        for folder in ("src/tenk", "src/tenk/platform", "src/tenk/lab")
        for path in sorted((ROOT / folder).iterdir())
        if path.is_dir() and not path.name.startswith(("_", "."))
    ]
    unnamed = [str(path.relative_to(ROOT)) for path in packages if path not in named]
    assert not unnamed, f"docs/contributing.md's layout leaves out {unnamed}"


def test_docs_site_builds_strictly_with_every_page_in_the_nav(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stderr + build.stdout
