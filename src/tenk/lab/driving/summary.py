"""A load generator's end-of-run summary, read where the run ends: checked against the fields tenk
reads from it, and kept whole, as the generator wrote it, for results.json (`RungResult.k6_summary`).

The file is the generator's, not tenk's: a k6 killed while writing leaves it cut short, a runner's log
may hold something else, a newer k6 may rename what it reports. Each of those fails here, as a
`MalformedFileError` naming the file and the field, instead of as a KeyError inside the figures.

Each engine's model (`driving.k6.K6Summary`, `driving.wrk.WrkSummary`) declares only what tenk reads
and ignores the rest; the rest is not lost, because the summary as written is kept beside the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Self

from pydantic import BaseModel, JsonValue, PrivateAttr, TypeAdapter, ValidationError

from tenk.lab.errors import MalformedFileError

_JSON_OBJECT: TypeAdapter[dict[str, JsonValue]] = TypeAdapter(dict[str, JsonValue])


class GeneratorSummary(BaseModel):
    engine: ClassVar[str] = "load generator"  # as errors name the file: "not a k6 summary"

    _written: dict[str, JsonValue] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_json(cls, text: str, source: Path | str) -> Self:
        """The summary in `text` (read from `source`, which errors name); raises MalformedFileError."""
        try:
            written = _JSON_OBJECT.validate_json(text)
            summary = cls.model_validate(written)
        except ValidationError as exc:
            raise MalformedFileError(source, f"a {cls.engine} summary", exc) from None
        summary._written = written
        return summary

    def as_written(self) -> dict[str, JsonValue]:
        """The whole summary, fields tenk does not read included, with the generator's keys and numbers."""
        return self._written
