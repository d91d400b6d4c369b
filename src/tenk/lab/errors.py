"""What the lab raises: command-line errors, never HTTP ones (so not `tenk.platform.errors.TenkError`s). Each is a
`click.ClickException`: `tenk lab` prints its message and exits non-zero.

click.ClickException
└── LabError                   a run cannot start or continue
    ├── ConfigError            a ladder or mix file is malformed (names file, line and key)
    ├── MalformedFileError     a file the lab reads back is not what it should be: a results.json,
    │                          a generator's summary (names file and field)
    └── NotReadyError          a process the lab started never answered (carries its log tail)
"""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import ValidationError


class LabError(click.ClickException):
    code = "lab_error"


class ConfigError(LabError):
    code = "config_error"

    def __init__(self, path: Path | str, line: int | None, key: str, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")
        self.path = Path(path)
        self.line = line
        self.key = key


class MalformedFileError(LabError):
    code = "malformed_file"

    def __init__(self, path: Path | str, expected: str, exc: ValidationError) -> None:
        first = exc.errors()[0]
        # The path into the document (`metrics.http_reqs.values.count`); empty when the text is no JSON at all.
        where = ".".join(str(part) for part in first["loc"])
        detail = f"{where}: {first['msg']}" if where else first["msg"]
        super().__init__(f"{path}: not {expected}: {detail}")
        self.path = Path(path)
        self.field = where


class NotReadyError(LabError):
    code = "not_ready"
