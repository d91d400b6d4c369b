"""Loading TOML with errors that name the file, line and key."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenk.lab.definition._tomlpos import locate
from tenk.lab.errors import ConfigError


def load(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, None, "", f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            path, None, "", f"not valid TOML: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        # tomllib says "... (at line 3, column 7)"; keep its wording, put the file first.
        line = getattr(exc, "lineno", None)
        raise ConfigError(path, line, "", f"not valid TOML: {exc}") from None


@dataclass(frozen=True)
class Where:
    """A place in a TOML file: a table (optionally the n-th of an array of tables)."""

    path: Path
    text: str
    table: str = ""
    index: int | None = None

    def label(self, key: str) -> str:
        prefix = self.table if self.index is None else f"{self.table}[{self.index + 1}]"
        return f"{prefix}.{key}" if prefix else key

    def error(self, key: str, message: str) -> ConfigError:
        line = locate(self.text, self.table, self.index, key)
        return ConfigError(self.path, line, self.label(key), message)

    def sub(self, table: str) -> Where:
        return Where(self.path, self.text, f"{self.table}.{table}" if self.table else table, self.index)

    def check_keys(self, data: dict[str, Any], allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        for key in data:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f"; known keys: {', '.join(sorted(allowed))}"
                raise self.error(key, f"unknown key{hint}")

    def string(self, data: dict[str, Any], key: str, default: str | None = None, choices: Iterable[str] = ()) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or (value == "" and default is None):
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        options = list(choices)
        if options and value not in options:
            raise self.error(key, f"expected one of {', '.join(options)}, got {value!r}")
        return value

    def integer(self, data: dict[str, Any], key: str, default: int | None = None, minimum: int = 0) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(key, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def number(self, data: dict[str, Any], key: str, default: float | None = None, minimum: float = 0.0) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise self.error(key, f"expected a number >= {minimum}, got {value!r}")
        return float(value)

    def boolean(self, data: dict[str, Any], key: str, default: bool | None = None) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def table_of(self, data: dict[str, Any], key: str) -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {value!r}")
        return value
