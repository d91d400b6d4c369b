"""Domains stand on the platform's public names: `tenk.platform` and its public subpackages, each name
in their `__all__`, never a module or name behind them (docs/platform.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.public_names import private_imports

ROOT = Path(__file__).parents[1]
DOMAINS = ("src/tenk/catalog", "src/tenk/tasks", "src/tenk/search", "src/tenk/ingest", "src/tenk/upstream")
EXAMPLES = ("examples/widgets", "examples/httparena/tenk")
SOURCES = sorted(path for folder in (*DOMAINS, *EXAMPLES) for path in (ROOT / folder).rglob("*.py"))


def test_every_domain_has_sources() -> None:
    assert all(any(path.is_relative_to(ROOT / folder) for path in SOURCES) for folder in (*DOMAINS, *EXAMPLES))


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_domain_imports_only_public_platform_names(path: Path) -> None:
    assert private_imports(path.read_text(), "tenk.platform") == []


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("from tenk.platform.reply import Reply", "has no __all__"),
        ("from tenk.platform.errors import error_response", "has no __all__"),
        ("from tenk.platform.readthrough._cache import ReadCache", "is a private module"),
        ("from tenk.platform import _NO_SUCH", "is not in its __all__"),
        ("import tenk.platform.lane", "import tenk.platform.lane"),
    ],
)
def test_a_private_platform_import_is_found(source: str, reason: str) -> None:
    [found] = private_imports(source, "tenk.platform")
    assert reason in found


def test_a_domain_s_own_modules_are_not_the_platform_s_concern() -> None:
    source = "from tenk.catalog.queries import PRODUCT_PAGE\nimport tenk.platformer"
    assert private_imports(source, "tenk.platform") == []
