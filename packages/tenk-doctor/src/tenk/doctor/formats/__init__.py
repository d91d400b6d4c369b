"""Output formats: text (as ruff prints), JSON, and SARIF 2.1.0 for code scanning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tenk.doctor._diagnose import Report
from tenk.doctor.formats import json_format, sarif, text

FORMATS: dict[str, Callable[[Report, Path], str]] = {
    "text": text.render,
    "json": json_format.render,
    "sarif": sarif.render,
}
